"""What `lsid`, `bparams` and `badmin showconf mbd` share (CLI-8): the cluster's settings in
force (GET /params: xced.api.models.ClusterParams, plain JSON here) and their LSF names.

XCE setting (config/xce.yaml)   LSF parameter (lsb.params)     LSF's meaning
clean_period_s                  CLEAN_PERIOD                   seconds a finished job stays in mbatchd's memory
kill_interval_s                 JOB_TERMINATE_INTERVAL         seconds between bkill's INT, TERM and KILL
max_array_size                  MAX_JOB_ARRAY_SIZE             the most elements of a job array
default_queue                   DEFAULT_QUEUE                  the queue of a job that names none
pend_reason_update_s            PEND_REASON_UPDATE_INTERVAL    seconds between updates of the pend reasons

Sources: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_config_ref/lsb.params.5.html (CLEAN_PERIOD,
JOB_TERMINATE_INTERVAL, MAX_JOB_ARRAY_SIZE, DEFAULT_QUEUE, PEND_REASON_UPDATE_INTERVAL);
docs/lsf-behaviour.md section 5.
"""

from __future__ import annotations

#: XCE's setting -> (LSF's lsb.params name, a function of the value giving LSF's value)
LSF_NAMES = {
    "clean_period_s": "CLEAN_PERIOD",
    "kill_interval_s": "JOB_TERMINATE_INTERVAL",
    "max_array_size": "MAX_JOB_ARRAY_SIZE",
    "default_queue": "DEFAULT_QUEUE",
    "pend_reason_update_s": "PEND_REASON_UPDATE_INTERVAL",
}


def fetch(c) -> tuple[dict, list[dict]]:
    """(GET /params, the queues of GET /queues): the settings, and the queues for the
    default one when xce.yaml names none (then the first queue is the default)."""
    p = c.request_retried("GET", "/params").json()
    queues = c.request_retried("GET", "/queues").json()["queues"]
    return p, queues


def value(v) -> str:
    """A setting as LSF prints one: numbers without a needless `.0`, lists space separated,
    none as `-`."""
    if v is None:
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, list):
        return " ".join(str(x) for x in v) or "-"
    if isinstance(v, bool):
        return "Y" if v else "N"
    if isinstance(v, dict):
        return " ".join(f"{k}={value(x)}" for k, x in v.items())
    return str(v)


def lsf_settings(p: dict, queues: list[dict]) -> list[tuple[str, str]]:
    """The LSF-named parameters (LSF_NAMES) with their values as LSF prints them; the
    default queue is the one GET /queues marks default."""
    s = dict(p["settings"])
    s["default_queue"] = next((q["name"] for q in queues if q.get("default")), s.get("default_queue"))
    return [(lsf, value(s.get(x))) for x, lsf in LSF_NAMES.items()]


def xce_settings(p: dict) -> list[tuple[str, str]]:
    """Every XCE setting in force (xce.yaml's names), sorted, as LSF prints values."""
    return [(k, value(v)) for k, v in sorted(p["settings"].items())]
