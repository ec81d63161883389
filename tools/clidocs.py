"""Generate the shell completions (completions/) and the man pages (man/) of xcecli, xceadmin
and xced from their command definitions (CLI-5), so that neither can drift from the code.

    .venv/bin/python tools/clidocs.py completions DIR   # xcecli.bash, _xcecli, xcecli.fish, ... into DIR
    .venv/bin/python tools/clidocs.py man DIR           # xcecli.1, xceadmin.1, xced.8 into DIR
    .venv/bin/python tools/clidocs.py help DIR          # xcecli's --help texts of its fast path into DIR
    .venv/bin/python tools/clidocs.py check             # exit 1 naming each file of the repository that is stale

(`make completions` and `make man` run the first two into the repository's own folders;
tests/cli/test_clidocs.py runs the third's comparison.)

Everything comes from one walk of each tool's command tree (`cli_tree`): the click command
objects the Typer apps build (`typer.main.get_command`), read by their attributes only
(`opts`, `is_flag`, `nargs`, `metavar`, `help`, ...), so a command built on plain click would be
read the same way. What a value completes with comes from the parameter's metavar: JOB,
QUEUE, PROFILE, HOST or PRESET (xcecli.complete.METAVAR_KINDS: asked of the daemon at each
TAB), one naming a FILE or DIR, or one listing its choices (`easy|fcfs`). Exit codes and environment variables come from the tables the code keeps
(xced.api.errors.CLI_EXIT_CODES, xced.daemon.EXIT_CODES, xced.constants.ENVIRONMENT and
FILES). The output depends on nothing but the code: no date, no path of this machine.

This is a build-time tool beside the packages (it imports xced.daemon, which the CLIs may not,
DESIGN rule 4), not part of the installed product.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: each tool: (module, attribute holding its Typer app, man section, one-line summary)
PROGS: dict[str, tuple[str, str, int, str]] = {
    "xcecli": ("xcecli.app", "app", 1, "submit and manage XCE jobs"),
    "xceadmin": ("xceadmin.app", "app", 1, "administer an XCE cluster: config, keys, hosts, replays"),
    "xced": ("xced.daemon", "app", 8, "the XCE daemon: controller, scheduler, worker and API server"),
}
#: the tools that get completion scripts (xced is started by admins and init systems)
COMPLETED = ("xcecli", "xceadmin")
#: where the repository keeps what this generates
COMPLETIONS_DIR = ROOT / "completions"
MAN_DIR = ROOT / "man"
HELP_DIR = ROOT / "xcecli" / "help"


@dataclass
class Opt:
    """One option: every spelling (`-q`, `--queue`, a flag's `--no-x`), whether it takes a
    value, the value's metavar, its help (with click's `[default: ...]` and `[required]`), and
    what completes its value: a completion kind of xcecli.complete, "file", "dir",
    "choice:A B", or "" (nothing known: the shell's default)."""

    names: list[str]
    takes_value: bool
    metavar: str
    help: str
    kind: str = ""


@dataclass
class Arg:
    """One positional argument: its metavar, whether it repeats, whether it is required,
    its help and what completes it (as Opt.kind, plus "command": a program, then its
    arguments)."""

    metavar: str
    variadic: bool
    required: bool
    help: str
    kind: str = ""


@dataclass
class Node:
    """A command or group of a tool. `path` is the words that name it ("xcecli", "xcecli apps
    show"); `children` its subcommands in definition order; `interspersed` False where the
    first positional argument ends the options (submit: what follows is the job's command)."""

    path: str
    help: str
    options: list[Opt]
    args: list[Arg]
    children: dict[str, "Node"] = field(default_factory=dict)
    interspersed: bool = True

    def walk(self):
        """This node, then every node under it, depth first in definition order."""
        yield self
        for c in self.children.values():
            yield from c.walk()

    @property
    def short(self) -> str:
        """The first sentence of the help, on one line."""
        text = " ".join(self.help.split("\n\n")[0].split())
        m = re.match(r"(.+?[.:;])(\s|$)", text)
        return (m.group(1) if m else text).rstrip(".:;")


_CHOICES = re.compile(r"^[a-z][a-z0-9_-]*(\|[a-z][a-z0-9_-]*)+$")


def _value_kind(metavar: str) -> str:
    from xcecli.complete import kind_of_metavar

    kind = kind_of_metavar(metavar)
    if kind:
        return kind
    if _CHOICES.match(metavar):
        return "choice:" + metavar.replace("|", " ")
    if "DIR" in metavar.split("|")[0]:
        return "dir"
    if "FILE" in metavar or metavar in ("REC",):
        return "file"
    return ""


def _help_of(param, ctx) -> str:
    rec = param.get_help_record(ctx) if hasattr(param, "is_flag") else None
    text = rec[1] if rec else (getattr(param, "help", None) or "")
    return " ".join(text.split())


def cli_tree(prog: str) -> Node:
    """The command tree of `prog` (a key of PROGS), read from its Typer app's click
    commands. Hidden commands and options are left out; every node gets -h/--help as the
    tool's root declares them. Raises KeyError for an unknown prog."""
    import importlib

    import typer

    module, attr, _, _ = PROGS[prog]
    root_cmd = typer.main.get_command(getattr(importlib.import_module(module), attr))
    root_ctx = root_cmd.make_context(prog, [], resilient_parsing=True)
    help_names = list(root_ctx.help_option_names)

    def build(cmd, path: str, parent_ctx) -> Node:
        ctx = cmd.make_context(path.split()[-1], [], parent=parent_ctx, resilient_parsing=True) \
            if parent_ctx is not None else root_ctx
        opts, args = [], []
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            if hasattr(p, "is_flag"):  # an option
                takes = not (p.is_flag or getattr(p, "count", False))
                long = next((o for o in p.opts if o.startswith("--")), p.opts[0])
                metavar = (p.metavar or long.lstrip("-").upper()) if takes else ""
                opts.append(Opt(sorted(p.opts + list(p.secondary_opts), key=_flag_order), takes, metavar,
                                _help_of(p, ctx), _value_kind(metavar) if takes else ""))
            else:
                metavar = p.metavar or p.name.upper()
                variadic = p.nargs == -1
                metavar = metavar if metavar.endswith("...") or not variadic else metavar + "..."
                kind = "command" if p.name == "command" and variadic else _value_kind(metavar)
                args.append(Arg(metavar, variadic, bool(p.required), _help_of(p, ctx), kind))
        opts.append(Opt(sorted(help_names, key=_flag_order), False, "", "show this help and exit"))
        node = Node(path, (cmd.help or "").strip(), opts, args,
                    interspersed=getattr(cmd, "allow_interspersed_args", True) and
                    (cmd.context_settings or {}).get("allow_interspersed_args", True))
        for name, sub in getattr(cmd, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                node.children[name] = build(sub, f"{path} {name}", ctx)
        return node

    return build(root_cmd, prog, None)


def _flag_order(flag: str) -> tuple[int, str]:
    return (flag.startswith("--"), flag)


# ---------------------------------------------------------------------------------- bash

def _sh(s: str) -> str:
    """`s` as one single-quoted shell word."""
    return "'" + s.replace("'", "'\\''") + "'"


def _tables(root: Node):
    """The tables every script holds: subcommands, option spellings, value-taking options
    with their kind, positional kinds, and the paths whose first argument ends the options."""
    cmds, opts, vals, args, nointer = {}, {}, {}, {}, []
    for n in root.walk():
        if n.children:
            cmds[n.path] = list(n.children)
        opts[n.path] = [f for o in n.options for f in o.names]
        for o in n.options:
            if o.takes_value:
                for f in o.names:
                    vals[f"{n.path} {f}"] = o.kind or "any"
        if n.args:
            kinds = [a.kind or "any" for a in n.args]
            if n.args[-1].variadic:
                kinds[-1] += "..."
            args[n.path] = kinds
        if not n.interspersed:
            nointer.append(n.path)
    return cmds, opts, vals, args, nointer


def _header(prog: str, comment: str, install: str) -> str:
    return (f"{comment} Completion of {prog}: its commands and options, and the job IDs, queue, profile and host\n"
            f"{comment} names the running daemon knows (asked by `xcecli __complete` with a 200 ms timeout; nothing\n"
            f"{comment} is offered when the daemon is down).\n"
            f"{comment} Generated by tools/clidocs.py from the command definitions (CLI-5): do not edit; run\n"
            f"{comment} `make completions` to regenerate it.\n"
            f"{comment} Install: {install}\n")


def _walk(v: str, first: str, end: str, words: str) -> str:
    """The loop that bash and zsh run over the words before the cursor (indexes `first` to
    `end`, exclusive, of array `words`): it finds the command path (`cmdpath`; not `path`,
    which zsh ties to $PATH), skips each option's value (noting --topdir's), counts the
    positional arguments (`npos`), and notes when the rest is a job's command (`rest`)."""
    return f"""    for ((i = {first}; i < {end}; i++)); do
        word=${{{words}[i]}}
        if [[ -n $skip ]]; then
            [[ $word == = ]] && continue  # bash splits --opt=VALUE into three words
            [[ $skip == --topdir ]] && topdir=$word
            skip=
        elif ((rest)); then
            ((npos++))
        elif [[ $word == -- ]]; then
            rest=1
        elif [[ $word == -?* ]]; then
            [[ $word == --topdir=* ]] && topdir=${{word#--topdir=}}
            [[ $word != *=* && -n ${{{v}_vals[$cmdpath $word]+x}} ]] && skip=$word
        elif ((npos == 0)) && [[ " ${{{v}_cmds[$cmdpath]}} " == *" $word "* ]]; then
            cmdpath="$cmdpath $word"
        else
            ((npos++))
            [[ -n ${{{v}_nointer[$cmdpath]}} ]] && rest=1
        fi
    done
"""


def bash_script(prog: str, root: Node | None = None) -> str:
    """The bash completion script of `prog` (needs bash 4.2 or newer: associative arrays)."""
    root = root or cli_tree(prog)
    cmds, opts, vals, args, nointer = _tables(root)
    v = f"_{prog}"
    out = [_header(prog, "#", f"source this file from ~/.bashrc, or copy it to "
                              f"~/.local/share/bash-completion/completions/{prog}"), ""]

    def table(name: str, rows: dict[str, str]) -> None:
        out.append(f"declare -gA {v}_{name}=(")
        out.extend(f"    [{_sh(k)}]={_sh(val)}" for k, val in rows.items())
        out.append(")")

    table("cmds", {k: " ".join(c) for k, c in cmds.items()})
    table("opts", {k: " ".join(o) for k, o in opts.items()})
    out.append("# options that take a value: what completes it (a kind of `xcecli __complete`, file, dir,")
    out.append("# choice:A B, command, or any)")
    table("vals", vals)
    out.append("# positional arguments in order: what completes each; ... repeats the last")
    table("args", {k: " ".join(a) for k, a in args.items()})
    out.append("# commands whose first argument ends their options (what follows is the job's command)")
    table("nointer", {k: "1" for k in nointer})
    out.append(f"""
{v}_values() {{  # KIND PREFIX [TOPDIR]: the daemon's values, or nothing
    local line
    while IFS= read -r line; do
        [[ -n $line ]] && COMPREPLY+=("${{line%%$'\\t'*}}")
    done < <(command xcecli __complete "$1" "$2" ${{3:+--topdir}} ${{3:+"$3"}} 2>/dev/null)
}}

{v}_kind() {{  # KIND CUR TOPDIR: fill COMPREPLY for one value
    case $1 in
        jobs | queues | profiles | hosts | presets)
            compopt +o default 2>/dev/null
            {v}_values "$1" "$2" "$3" ;;
        choice:*)
            compopt +o default 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -W "${{1#choice:}}" -- "$2") ;;
        dir)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -d -- "$2") ;;
        command) mapfile -t COMPREPLY < <(compgen -c -- "$2") ;;
    esac  # file, any: the shell's own file names (complete -o default)
}}

{v}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cmdpath={prog} word skip= topdir= npos=0 rest=0 i
    COMPREPLY=()
{_walk(v, "1", "COMP_CWORD", "COMP_WORDS")}    [[ -n $skip && $cur == = ]] && cur=
    if [[ -n $skip ]]; then
        {v}_kind "${{{v}_vals[$cmdpath $skip]}}" "$cur" "$topdir"
    elif ((rest)); then
        ((npos == 0)) && mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    elif [[ $cur == -* ]]; then
        compopt +o default 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -W "${{{v}_opts[$cmdpath]}}" -- "$cur")
    elif [[ -n ${{{v}_cmds[$cmdpath]}} ]] && ((npos == 0)); then
        compopt +o default 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -W "${{{v}_cmds[$cmdpath]}}" -- "$cur")
    else
        local -a kinds=(${{{v}_args[$cmdpath]}})
        local kind= last=$(( ${{#kinds[@]}} - 1 ))
        if ((last >= 0)); then
            kind=${{kinds[npos]}}
            [[ -z $kind && ${{kinds[last]}} == *... ]] && kind=${{kinds[last]}}
        fi
        if [[ -z $kind ]]; then compopt +o default 2>/dev/null; return 0; fi
        {v}_kind "${{kind%...}}" "$cur" "$topdir"
    fi
    return 0
}}

complete -o default -F {v} {prog}
""")
    return "\n".join(out)


# ----------------------------------------------------------------------------------- zsh

def _desc(s: str, width: int = 70) -> str:
    s = " ".join(s.split())
    s = re.sub(r"\s*\[(default|required)[^\]]*\]", "", s)
    m = re.match(r"(.+?(?:[.;](?=\s+[A-Z(`])|;))", s)  # the first sentence (not cut at "e.g.")
    s = (m.group(1) if m else s).rstrip(".;")
    while s.count("(") > s.count(")"):  # never cut inside parentheses: drop the open aside
        s = s[:s.rindex("(")].rstrip(" ,;:")
    return s if len(s) <= width else s[:width - 3].rstrip() + "..."


def zsh_script(prog: str, root: Node | None = None) -> str:
    """The zsh completion script of `prog` (#compdef: put it in a directory of $fpath, or
    source it after compinit)."""
    root = root or cli_tree(prog)
    cmds, opts, vals, args, nointer = _tables(root)
    v = f"_{prog}"
    out = [f"#compdef {prog}", _header(prog, "#", "copy it to a directory of $fpath (e.g. ~/.zfunc, with "
                                                  "fpath=(~/.zfunc $fpath) before compinit), or source it"), ""]

    def table(name: str, rows: dict[str, str]) -> None:
        out.append(f"typeset -gA {v}_{name}")
        out.append(f"{v}_{name}=(")
        out.extend(f"    {_sh(k)} {_sh(val)}" for k, val in rows.items())
        out.append(")")

    table("cmds", {k: " ".join(c) for k, c in cmds.items()})
    # each subcommand and option with its description, as _describe takes them (name:text)
    table("cdesc", {f"{n.path}": "\n".join(f"{name.replace(':', chr(92) + ':')}:{_desc(c.short)}"
                                           for name, c in n.children.items())
                    for n in root.walk() if n.children})
    table("odesc", {n.path: "\n".join(f"{f.replace(':', chr(92) + ':')}:{_desc(o.help) or f}"
                                      for o in n.options for f in o.names) for n in root.walk()})
    table("vals", vals)
    table("args", {k: " ".join(a) for k, a in args.items()})
    table("nointer", {k: "1" for k in nointer})
    out.append(f"""
{v}_values() {{  # KIND PREFIX TOPDIR: the daemon's values with their descriptions
    local -a got lines
    local line
    lines=("${{(@f)$(command xcecli __complete "$1" "$2" ${{3:+--topdir}} ${{3:+"$3"}} 2>/dev/null)}}")
    for line in $lines; do
        [[ -n $line ]] && got+=("${{${{line%%$'\\t'*}}//:/\\\\:}}:${{line#*$'\\t'}}")
    done
    (( $#got )) && _describe -t $1 $1 got
    return 0
}}

{v}_kind() {{  # KIND TOPDIR: complete one value
    case $1 in
        jobs|queues|profiles|hosts|presets) {v}_values "$1" "$PREFIX" "$2" ;;
        choice:*) local -a ch; ch=(${{=${{1#choice:}}}}); compadd -a ch ;;
        dir) _files -/ ;;
        command) _command_names -e ;;
        *) _files ;;
    esac
}}

{v}() {{
    local cmdpath={prog} word skip= topdir= npos=0 rest=0 i
{_walk(v, "2", "CURRENT", "words")}    local -a items
    if [[ -n $skip ]]; then
        {v}_kind "${{{v}_vals[$cmdpath $skip]}}" "$topdir"
    elif ((rest)); then
        if ((npos == 0)); then _command_names -e; else _files; fi
    elif [[ $PREFIX == -* ]]; then
        items=("${{(@f)${{{v}_odesc[$cmdpath]}}}}")
        _describe -t options option items
    elif [[ -n ${{{v}_cmds[$cmdpath]}} ]] && ((npos == 0)); then
        items=("${{(@f)${{{v}_cdesc[$cmdpath]}}}}")
        _describe -t commands command items
    else
        local -a kinds
        kinds=(${{={v}_args[$cmdpath]}})
        local kind=${{kinds[npos + 1]}}
        (( $#kinds )) && [[ -z $kind && ${{kinds[-1]}} == *... ]] && kind=${{kinds[-1]}}
        [[ -n $kind ]] && {v}_kind "${{kind%...}}" "$topdir"
    fi
    return 0
}}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    {v} "$@"
else
    compdef {v} {prog}
fi
""")
    return "\n".join(out)


# ---------------------------------------------------------------------------------- fish

def _fq(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(prog: str, root: Node | None = None) -> str:
    """The fish completion script of `prog` (copy it to ~/.config/fish/completions/)."""
    root = root or cli_tree(prog)
    cmds, _, vals, args, nointer = _tables(root)
    v = f"__{prog}"
    out = [_header(prog, "#", f"copy it to ~/.config/fish/completions/{prog}.fish"), ""]
    out.append(f"set -g {v}_paths " + " ".join(_fq(f"{p} {c}") for p, cs in cmds.items() for c in cs))
    out.append(f"set -g {v}_valopts " + " ".join(_fq(k) for k in vals))
    out.append(f"set -g {v}_nointer " + (" ".join(_fq(k) for k in nointer) or "''"))
    out.append(f"""
# the command path of the line so far ("{prog} apps"), then whether the rest is a job's command
# (1 or 0), the positional arguments given, and the --topdir given
function {v}_state
    set -l path {prog}
    set -l skip ''
    set -l topdir ''
    set -l npos 0
    set -l rest 0
    for t in (commandline -opc)[2..-1]
        if test -n "$skip"
            test "$skip" = --topdir; and set topdir $t
            set skip ''
        else if test $rest = 1
            set npos (math $npos + 1)
        else if test "$t" = --
            set rest 1
        else if string match -q -- '-?*' $t
            string match -q -- '--topdir=*' $t; and set topdir (string replace -- '--topdir=' '' $t)
            if not string match -q -- '*=*' $t; and contains -- "$path $t" ${v}_valopts
                set skip $t
            end
        else if test $npos = 0; and contains -- "$path $t" ${v}_paths
            set path "$path $t"
        else
            set npos (math $npos + 1)
            contains -- $path ${v}_nointer; and set rest 1
        end
    end
    printf '%s\\n' $path $rest $npos $topdir
end

# true when the line so far is at PATH (not in a job's command), with at most N positionals
function {v}_at
    set -l s ({v}_state)
    test "$s[1]" = "$argv[1]"; and test "$s[2]" = 0
    and begin; test (count $argv) -lt 2; or test "$s[3]" -le "$argv[2]"; end
end

function {v}_values --argument-names kind
    set -l s ({v}_state)
    set -l top
    test -n "$s[4]"; and set top --topdir $s[4]
    command xcecli __complete $kind (commandline -ct) $top 2>/dev/null
end

# true at the first word of a job's command (after `--`, or a submit's first argument)
function {v}_at_command
    set -l s ({v}_state)
    test "$s[2]" = 1; and test "$s[3]" = 0
end
""")
    out.append(f"complete -c {prog} -n {v}_at_command -f -a '(__fish_complete_command)'")

    def flags(o: Opt) -> str:
        parts = []
        for f in o.names:
            if f.startswith("--"):
                parts.append(f"-l {f[2:]}")
            elif len(f) == 2:
                parts.append(f"-s {f[1]}")
            else:
                parts.append(f"-o {f[1:]}")
        return " ".join(parts)

    def value(kind: str) -> str:
        if kind in ("jobs", "queues", "profiles", "hosts", "presets"):
            return f" -f -a {_fq(f'({v}_values {kind})')}"
        if kind.startswith("choice:"):
            return f" -f -a {_fq(kind[7:])}"
        if kind == "dir":
            return " -f -a '(__fish_complete_directories)'"
        if kind == "command":
            return " -f -a '(__fish_complete_command)'"
        return " -F"

    for n in root.walk():
        cond = _fq(f"{v}_at {_fq(n.path)}")
        for name, c in n.children.items():
            out.append(f"complete -c {prog} -n {cond} -f -a {_fq(name)} -d {_fq(_desc(c.short))}")
        for o in n.options:
            rule = f"complete -c {prog} -n {cond} {flags(o)}"
            if o.takes_value:
                rule += " -r" + value(o.kind)
            out.append(rule + f" -d {_fq(_desc(o.help) or o.names[-1])}")
        if n.args:
            # one rule per positional kind, each for the arguments at its place
            for i, a in enumerate(n.args):
                if a.kind in ("", "file") and not n.children:
                    continue
                at = _fq(f"{v}_at {_fq(n.path)} {i}") if not a.variadic else cond
                if a.variadic and i:
                    at = _fq(f"{v}_at {_fq(n.path)}")
                out.append(f"complete -c {prog} -n {at}{value(a.kind)}")
            if not n.args[-1].variadic:  # past the last argument: nothing, not file names
                past = f"not {v}_at {_fq(n.path)} {len(n.args) - 1}; and {v}_at {_fq(n.path)}"
                out.append(f"complete -c {prog} -n {_fq(past)} -f")
        elif not n.children:
            out.append(f"complete -c {prog} -n {cond} -f")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------- man

_ROFF_CHARS = {"\u2013": "\\(en", "\u2014": "\\(em", "\u2019": "'", "\u2018": "`", "\u201c": "\\(lq",
               "\u201d": "\\(rq", "\u2192": "\\(->", "\u00d7": "\\(mu", "\u2265": "\\(>=", "\u2264": "\\(<=",
               "\u2026": "...", "\u00a0": "\\ "}


def _roff(text: str) -> str:
    """Plain text as roff: backslashes escaped, a leading dot or quote made harmless, and
    characters beyond ASCII as groff's named or \\[uXXXX] glyphs."""
    text = text.replace("\\", "\\e")
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        else:
            out.append(_ROFF_CHARS.get(ch, f"\\[u{ord(ch):04X}]"))
    lines = "".join(out).split("\n")
    return "\n".join(("\\&" + ln) if ln[:1] in (".", "'") else ln for ln in lines)


def _bold_flag(f: str) -> str:
    return "\\fB" + f.replace("-", "\\-") + "\\fR"


def _text(text: str) -> str:
    """Help text as roff: `code` in bold (the help's own Markdown-like quoting)."""
    out = _roff(" ".join(text.split()))
    return re.sub(r"`([^`]+)`", lambda m: "\\fB" + m.group(1).replace("-", "\\-") + "\\fR", out)


def _paragraphs(text: str) -> list[str]:
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.replace("\b", "")) if p.strip()]
    return [_text(p) for p in paras]


def _usage(n: Node) -> str:
    words = [n.path]
    if any(o.names != ["-h", "--help"] and o.names != ["--help"] for o in n.options):
        words.append("[OPTIONS]")
    if n.children:
        words.append("COMMAND ...")
    for a in n.args:
        words.append(a.metavar if a.required else f"[{a.metavar.strip('[]')}]")
    return " ".join(words)


def _options(opts: list[Opt]) -> list[str]:
    out = []
    for o in opts:
        head = ", ".join(_bold_flag(f) for f in o.names)
        if o.takes_value:
            head += " \\fI" + _roff(o.metavar).replace("-", "\\-") + "\\fR"
        out += [".TP", head, _text(o.help) or "\\&"]
    return out


def man_page(prog: str, root: Node | None = None) -> str:
    """The man page of `prog` in roff (man macros): NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
    COMMANDS (each with its usage, help, options and their defaults), EXIT STATUS,
    ENVIRONMENT, FILES, SEE ALSO."""
    from xced.api.errors import CLI_EXIT_CODES
    from xced.constants import ENVIRONMENT, FILES
    from xced.daemon import EXIT_CODES
    from xced.version import version

    root = root or cli_tree(prog)
    _, _, section, summary = PROGS[prog]
    out = [f'.\\" Man page of {prog}. Generated by tools/clidocs.py from the command definitions (CLI-5):',
           '.\\" do not edit; run "make man" to regenerate it.',
           f'.TH {prog.upper()} {section} "" "XCE {version()}" "XCE Manual"',
           ".SH NAME", f"{prog} \\- {_roff(summary)}",
           ".SH SYNOPSIS", ".nf", _roff(_usage(root)).replace("-", "\\-"), ".fi",
           ".SH DESCRIPTION"]
    paras = _paragraphs(root.help)
    for i, p in enumerate(paras):
        out += ([".PP"] if i else []) + [p]
    if root.args:
        out.append(".SH ARGUMENTS")
        for a in root.args:
            out += [".TP", "\\fI" + _roff(a.metavar) + "\\fR", _roff(a.help) or "\\&"]
    out += [".SH OPTIONS"] + _options(root.options)
    leaves = [n for n in root.walk() if n is not root]
    if leaves:
        out.append(".SH COMMANDS")
        for n in leaves:
            out += [".SS " + '"' + _roff(_usage(n)).replace("-", "\\-").replace('"', '""') + '"']
            for i, p in enumerate(_paragraphs(n.help)):
                out += ([".PP"] if i else []) + [p]
            if n.children:
                out += [".PP", "Commands: " + ", ".join(f"\\fB{c}\\fR" for c in n.children) + "."]
            for a in n.args:
                if a.help:
                    out += [".TP", "\\fI" + _roff(a.metavar).replace("-", "\\-") + "\\fR", _text(a.help)]
            out += _options([o for o in n.options if o.names not in (["-h", "--help"], ["--help"])])
    out.append(".SH EXIT STATUS")
    for code, meaning in (EXIT_CODES if prog == "xced" else CLI_EXIT_CODES):
        out += [".TP", f"\\fB{code}\\fR", _roff(meaning)]
    if prog == "xcecli":
        out += [".PP", "\\fBxcecli submit \\-K\\fR exits with the job's own exit code, as \\fBbsub \\-K\\fR does "
                       "(126 when the job was killed while it pended)."]
    out.append(".SH ENVIRONMENT")
    for name, progs, what in ENVIRONMENT:
        if prog in progs:
            out += [".TP", f"\\fB{_roff(name)}\\fR", _text(what)]
    out.append(".SH FILES")
    for path, what in FILES:
        out += [".TP", f"\\fI{_roff(path)}\\fR", _roff(what)]
    others = [f"\\fB{p}\\fR({PROGS[p][2]})" for p in PROGS if p != prog]
    out += [".SH SEE ALSO", ", ".join(others) + ", and the README of the XCE repository."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------- files

def completion_files() -> dict[str, str]:
    """File name -> content of every completion script."""
    out = {}
    for prog in COMPLETED:
        root = cli_tree(prog)
        out[f"{prog}.bash"] = bash_script(prog, root)
        out[f"_{prog}"] = zsh_script(prog, root)
        out[f"{prog}.fish"] = fish_script(prog, root)
    return out


def man_files() -> dict[str, str]:
    """File name -> content of every man page."""
    return {f"{prog}.{PROGS[prog][2]}": man_page(prog) for prog in PROGS}


def help_files() -> dict[str, str]:
    """File name -> the help `xcecli` prints for each command line whose help the start-up
    fast path serves (xcecli.fast.HELP, CLI-7): NAME.txt into a pipe (Rich's 80 columns, no
    colour) and NAME.ansi on an 80-column colour terminal (FORCE_COLOR with COLUMNS=80 and
    TERM=xterm-256color: Rich renders for a terminal, the bytes a terminal gets apart from
    its own newline translation). The Typer app's own output, run in a subprocess as a user
    would run it."""
    import os
    import subprocess

    from xcecli.fast import HELP

    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "TERM", "FORCE_COLOR", "NO_COLOR", "COLORTERM", "TERMINAL_WIDTH")}
    colour = {**env, "FORCE_COLOR": "1", "COLUMNS": "80", "TERM": "xterm-256color"}
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"
    out = {}
    for words, name in HELP.items():
        for file, e in ((name, env), (name[:-len(".txt")] + ".ansi", colour)):
            r = subprocess.run([sys.executable, "-c", code, *words], capture_output=True, text=True, env=e,
                               cwd=str(ROOT), check=True)
            out[file] = r.stdout
    return out


def stale() -> list[str]:
    """The generated files of the repository that differ from what the code generates now
    (or are missing, or are there without being generated), as paths relative to the root."""
    bad = []
    for d, files in ((COMPLETIONS_DIR, completion_files()), (MAN_DIR, man_files()), (HELP_DIR, help_files())):
        for name, text in files.items():
            p = d / name
            if not p.is_file() or p.read_text() != text:
                bad.append(str(p.relative_to(ROOT)))
        if d.is_dir():
            bad += [str(p.relative_to(ROOT)) for p in sorted(d.iterdir()) if p.name not in files]
    return bad


def write(files: dict[str, str], outdir: Path) -> None:
    """Write `files` into `outdir` (made if missing), replacing what was there under those names."""
    outdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (outdir / name).write_text(text)


def main(argv: list[str]) -> int:
    """`completions DIR`, `man DIR`, `help DIR` or `check`; exit 2 with a usage line for anything else."""
    if len(argv) == 2 and argv[0] in ("completions", "man", "help"):
        make = {"completions": completion_files, "man": man_files, "help": help_files}[argv[0]]
        write(make(), Path(argv[1]))
        return 0
    if argv == ["check"]:
        bad = stale()
        for p in bad:
            print(f"clidocs: {p} is stale: run `make completions man help`", file=sys.stderr)
        return 1 if bad else 0
    print("usage: tools/clidocs.py completions DIR | man DIR | help DIR | check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
