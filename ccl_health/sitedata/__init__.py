"""Site data: site files, the system configuration, the transport registry
and the schemas they are checked against."""
