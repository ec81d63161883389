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
    "SKELETON_PRESET",
    "SKELETON_PROJECTS",
    "SKELETON_QUEUES",
    "SKELETON_RBAC",
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

# How long a finished job stays in the daemon's memory and in `xcecli jobs` (as
# LSF's CLEAN_PERIOD): seconds or a duration such as 1h. After it the job's record
# is read from the store: `xcecli show`, `hist` and `jobs -a` still find it.
clean_period: 1h

# How long a host may be without its worker (crashed, unreachable, stopped) before
# its jobs are requeued or ended EXIT, as their profile's on_host_failure says:
# seconds or a duration. Longer than a worker restart plus its rejoin.
host_lost_grace: 2m

# A session decides pending jobs in order, so a reason given before a later job of the
# same session started may count what that job took ("1 free slot"); the pending jobs
# are decided again this long after such a session, unless an event has run one by
# then (as LSF's PEND_REASON_UPDATE_INTERVAL): seconds or a duration, at least 1.
pend_reason_update: 5

# Seconds a request that writes waits for a store another process has locked; then
# it answers store_busy (exit 3) and changed nothing.
store_busy_timeout: 5

# Failed starts or declined dispatches in a row (each followed by a wait doubling
# from 1 s to 60 s) before a job is held by the system for an admin to release.
max_dispatch_failures: 5

# Seconds a worker waits for its supervisor launcher before it replaces it and the
# job is dispatched again.
launch_timeout: 10

# Directory of site presets offered to users (absolute, or relative to the TopDir);
# null: config/presets/. One NAME.yaml each (xcecli presets list, pull).
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
#   max_memory     largest memory limit (-M) of a job, and the limit of one that gives none:
#                  MB, or "512MB", "4GB", "1TB"
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

# The project tree and the roles: every line of the example is commented out, so a fresh
# TopDir stays in open mode (PRJ-4) with no role bound. Removing the "# " in front of the
# example's lines gives a config that builds.
SKELETON_PROJECTS = Template("""\
# projects.yaml: the project tree (PRJ-1..PRJ-8). While no project is defined the
# cluster is in open mode: submits are not checked and jobs need no -P. Once one is,
# a user submits with -P PATH to a project they are a member of (or gets a default),
# and each project holds at most its share and its quota. Check with:
#     xceadmin build --topdir $topdir
# Unknown keys are errors, so a typo never goes unnoticed.
#
# Keys:
#   groups            NAME: [user, ...], groups beside the system's ones
#   projects          PATH: project, in any order; a path is / and names joined by
#                     / (letters, digits, '_', '.', '-'), at most 16 deep, and every
#                     ancestor of a project must be a project too
#   default_projects  group NAME: PATH, the project a job with no -P gets when its
#                     user is in the group: the primary group first, then in this
#                     order; then default_project of xce.yaml
#
# Keys of a project (all optional):
#   description   free text
#   share         what it is carved from its parent's share (the cluster's, for a
#                 top-level project): a percentage of every resource ("60%"), or per
#                 resource an amount or a percentage ({slots: 40, mem: 256GB,
#                 gpu: 50%}). Siblings' shares add up to at most their parent's; a
#                 project's own jobs and its children without a share draw from
#                 what its children's shares leave
#   quota         cap on the concurrent use of the whole subtree ({slots: 32})
#   member_quota  cap on each member's concurrent use over the subtree ({slots: 8})
#   members       who may submit to this very project (not its children): user
#                 names, and groups written "@name" (quoted: @ starts no YAML value)
#   admins        users and "@groups" who may view, kill, modify and requeue any job
#                 of the subtree; they submit as members, like everyone else
# Resources: slots (whole slots), mem (MB, or with a unit: 512MB, 256GB, 1TB) and
# the consumable resources of hosts.yaml (gpu, ...).

# groups:
#   hep: [erin, frank]
#
# projects:
#   /physics:
#     description: Physics department
#     share: 60%
#     admins: [alice]
#   /physics/hep:
#     share: {slots: 40, mem: 256GB}
#     quota: {slots: 32}
#     member_quota: {slots: 8}
#     members: [bob, "@hep"]
#   /physics/astro:
#     members: [dave]
#   /bio:
#     share: 30%
#     members: [gina]
#
# default_projects:
#   hep: /physics/hep
""")

SKELETON_RBAC = Template("""\
# rbac.yaml: roles and who holds them where (RBAC-1..RBAC-4). Without it no role is
# bound: every user may submit to a queue and view the cluster, members submit to
# their projects, owners act on their own jobs, project admins (projects.yaml) on
# their subtree's jobs, and the admins of xce.yaml on everything. Check with:
#     xceadmin build --topdir $topdir
#
# Keys:
#   roles     NAME: [permission, ...]. The permissions: queue:submit,
#             project:submit, project:view, job:view, job:kill, job:modify,
#             job:requeue, cluster:view, cluster:admin
#   bindings  a list of {role, users, groups, scope}: the role's permissions for
#             the users (names) and groups (names, without @) over the project
#             `scope` and its subtree; scope / (the default) is the whole cluster.
#             A role holding cluster:admin or cluster:view is bound at / only.

# roles:
#   operator: [job:view, job:kill, job:requeue]
#   submitter: [project:submit]
#
# bindings:
#   - {role: operator, users: [oscar], groups: [], scope: /physics}
#   - role: submitter
#     users: []
#     groups: [hep]
#     scope: /physics
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


#: config/presets/site-default.yaml of `xceadmin init`: a server preset (PRE-3)
SKELETON_PRESET = """\
# A server preset (PRE-3), served read-only to every user of this cluster.
# Users copy it with `xcecli presets pull site-default`, then submit with
# `xcecli submit --preset site-default -- COMMAND`; options given on the command
# line win. One NAME.yaml per preset in this directory; an edited file is served
# changed at once (no restart). `xceadmin build` checks every file here.
#
# Keys are the long names of xcecli submit's options (queue, ntasks, name, stdout,
# stderr, run_limit, memory, resreq, app, app_params, pre_exec, post_exec,
# dependency, env, project); values are written as on the command line, as strings.
# resreq is a list; env and app_params are mappings of NAME: VALUE.
queue: "short"
run_limit: "30"
stdout: "%J.out"
"""
