"""Text of the config files that `xceadmin init` and the first start of a
personal cluster write. `string.Template` placeholders (`$name`) are filled by
`xced.config.personal`; values arrive already quoted as YAML scalars.
"""

from __future__ import annotations

from string import Template

__all__ = [
    "PERSONAL_HOSTS",
    "PERSONAL_QUEUES",
    "PERSONAL_SETTINGS",
    "SKELETON_HOSTS",
    "SKELETON_QUEUES",
    "SKELETON_SETTINGS",
]

# --------------------------------------------------------------------------- skeleton

SKELETON_SETTINGS = Template("""\
# xce.yaml: the cluster as a whole. Compile and check with:
#     xceadmin build --topdir $topdir
# Unknown keys are errors, so a typo never goes unnoticed.

# Name shown by the CLIs; letters, digits, '_', '.' and '-'.
cluster_name: $cluster_name

# production: a client is the user it runs as (its uid over the Unix socket).
# test: a client may claim any user (--as-user, XCE_TEST_USER), for test suites
#       that play many users without root. Never use test on a shared machine.
mode: production

# Users allowed to run admin commands (xceadmin ..., other users' jobs).
# Root is not an admin unless it is named here.
admins:
  - $user

# Queue a job goes to when it names none (-q). Must be a queue of queues.yaml;
# null or absent means the first queue there.
default_queue: normal

# Application profile and project a job gets when it names none (-a, -P).
default_application: null
default_project: null

# TCP listener for other hosts (workers started with
# `xced --roles worker --controller tcp://HOST:PORT`). Local clients always use
# the Unix socket in the TopDir. port: null means no TCP listener; 0 picks a
# free port and writes it to run/xced.port.
listen:
  host: 127.0.0.1
  port: null

# Seconds between the INT, TERM and KILL signals of `xcecli kill`.
kill_interval: 10

# Seconds between SIGTERM and SIGKILL when a job passes its run limit.
limit_grace: 10

# Seconds the scheduler waits to gather events into one session: 0 to 0.010.
sched_delay: 0.005

# The most elements a job array may have (-J 'name[1-N]'), and the largest %limit,
# as LSF's MAX_JOB_ARRAY_SIZE: 1 to 1000000. Each element is a row in the store, so
# a submit takes time in proportion to its array's size.
max_array_size: 1000

# Seconds a request that writes waits for a store another process has locked; then
# it answers store_busy (exit 3) and changed nothing.
store_busy_timeout: 5

# Failed starts or declined dispatches in a row (each followed by a wait doubling
# from 1 s to 60 s) before a job is held by the system for an admin to release.
max_dispatch_failures: 5

# Seconds a worker waits for its supervisor launcher before it replaces it and the
# job is dispatched again.
launch_timeout: 10

# Directory of site presets offered to users (relative to the TopDir), or null.
presets_dir: null
""")

SKELETON_QUEUES = Template("""\
# queues.yaml: the queues, in order. Jobs of a higher-priority queue are
# considered first; within a queue, first come first served.
#
# Keys of a queue (only name is required):
#   name           letters, digits, '_', '.' and '-'; unique
#   priority       integer, higher first (default 30)
#   description    free text shown by `xcecli queues`
#   max_tasks      most tasks (slots) one job may ask for (-n), integer >= 1
#   max_run_limit  longest run limit (-W) a job may have: minutes, "hours:minutes"
#                  like "2:30", or with a unit: "90s", "30m", "2h"
#   max_memory     largest memory limit (-M) of a job: MB, or "512MB", "4GB", "1TB"
#   host_limit     most hosts one job may span, integer >= 1
#   backfill       true: EASY backfilling (SCHED-1). A queue head that cannot start
#                  gets a reservation; later jobs may start first only if they end
#                  by then (their run limit) or leave it the room it needs.
#                  false: strict first come, first served

queues:
  - name: normal
    priority: 30
    description: Default queue for batch work
    max_run_limit: "24:00"
    backfill: true
    # max_tasks: 64
    # max_memory: 64GB
    # host_limit: 4

  - name: short
    priority: 40
    description: Jobs of at most an hour, considered before normal ones
    max_run_limit: 1h
    backfill: false
""")

SKELETON_HOSTS = Template("""\
# hosts.yaml: the execution hosts. Written for the machine `xceadmin init` ran
# on; add one entry per host that joins with `xced --roles worker`.
#
# Keys of a host (name, slots and memory are required):
#   name        the host's name, unique; letters, digits, '_', '.' and '-'
#   slots       how many tasks it runs at once, integer >= 1
#   memory      memory jobs may use: MB, or "64GB", "512MB"
#   resources   countable resources for -R "rusage[...]", e.g. {gpu: 2}
#   type, model strings matched by -R "select[type==...]"
#   attributes  more name: string pairs for select, e.g. {rack: r12}
#   tags        list of strings, e.g. [fast, ssd]

hosts:
  - name: $host
    slots: $slots
    memory: $memory
    # resources:
    #   gpu: 2
    # type: X86_64
    # model: generic
    # attributes:
    #   rack: r1
    # tags: [local]
""")

# --------------------------------------------------------------------------- personal

PERSONAL_SETTINGS = Template("""\
# Personal single-host cluster, made on the first start of xced.
# Edit, then check with: xceadmin build --topdir $topdir
cluster_name: personal
mode: production
admins:
  - $user
default_queue: normal
""")

PERSONAL_QUEUES = Template("""\
queues:
  - name: normal
    priority: 30
    description: Default queue
""")

PERSONAL_HOSTS = Template("""\
hosts:
  - name: $host
    slots: $slots
    memory: $memory
""")
