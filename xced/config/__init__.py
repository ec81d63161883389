"""The config compiler (CFG-*): the YAML files of a TopDir -> ClusterConfig.

Pure library: no daemon imports. `xceadmin build`, `xceadmin init` and the
daemon's start all come through here.
"""

from xced.config.diagnostics import Diagnostic
from xced.config.loader import BuildResult, load_cluster_config
from xced.config.personal import write_personal_config, write_skeleton

__all__ = [
    "BuildResult",
    "Diagnostic",
    "load_cluster_config",
    "write_personal_config",
    "write_skeleton",
]
