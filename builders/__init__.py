"""ReFrame build fixtures: nccl-tests / rccl-tests, libfabric and the
libfabric network plugin, built from pinned sources into a cache keyed by
recipe (see :mod:`ccl_health.buildcache`); RCCL's header made from RCCL's
source where no ROCm provides it (:mod:`builders.rccl_header`)."""
