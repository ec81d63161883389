"""The directive reader of job scripts (xcecli.scripts; JOB-12, CLI-8; issue 18 part 1): which
lines are directives, how their words split, what each prefix's option table makes of
them, the errors that name the script's line, and the interpreter of a `#!` line.

LSF sources: IBM's bsub `command` argument ("bsub options can also be specified in the
standard input if the line begins with #BSUB; for example, #BSUB -x. If an option is given on
both the bsub command line, and in the standard input, the command line option overrides"):
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html ;
bsub `job_script` (#BSUB at the beginning of each line; the script need not be executable):
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.job_script.1.html
"""

from __future__ import annotations

import pytest

from xcecli.fast import submit_spec
from xcecli.lsf.bsub import directive_options
from xcecli.scripts import ScriptError, directives, interpreter, options_of, origin, run_with


def _read(text: str, where: str = "job.lsf"):
    found, late = directives(text, where)
    opts, lines, warnings = options_of(found, where, submit_spec(), directive_options)
    return opts, lines, late + warnings


def test_directives_are_read_from_the_top_up_to_the_first_command():
    """The #! line, blank lines and comments are skipped; the first other line ends the
    directives; one below it is reported, not read."""
    text = ("#!/bin/bash\n\n# comment\n#BSUB -n 4 -q normal   # trailing comment\n  \n#BSUB -R 'span[hosts=1]'\n"
            "#BSUB -R \"rusage[mem=100]\"\n#XCE --env A=1 --env B='two words'\nexport X=1\n#BSUB -W 5\n")
    opts, lines, warnings = _read(text)
    assert opts == {"ntasks": "4", "queue": "normal", "resreq": ["span[hosts=1]", "rusage[mem=100]"],
                    "env": ["A=1", "B=two words"]}
    assert lines == {"ntasks": [4], "queue": [4], "resreq": [6, 7], "env": [8]}
    assert warnings == ["job.lsf:10: #BSUB -W 5: not read: directives end at the script's first command line; move "
                        "it above that line if it is meant for this job"]


def test_a_directive_is_split_as_a_shell_splits_it():
    """JOB-12: `#` starts a comment only at the start of a word, as in sh: `-J run#1` keeps
    its name whole, a quoted `#` stays, `  # note` ends the line."""
    opts, _, _ = _read("#BSUB -J run#1   # the name has a hash\n#XCE --env 'A=x # y'\n")
    assert opts == {"name": "run#1", "env": ["A=x # y"]}


def test_the_last_directive_of_a_one_value_option_wins():
    opts, lines, _ = _read("#BSUB -J first\n#BSUB -J second\n")
    assert opts == {"name": "second"} and lines == {"name": [1, 2]} and origin(lines["name"]) == \
        "from script lines 1, 2"


def test_bsub_spellings_map_to_xcecli_options():
    """#BSUB takes LSF's spellings (-app as one token, -oo as the overwrite form of -o, with
    no warning: IBM bsub -oo); #XCE xcecli's (-a, --app-param, --eo)."""
    opts, _, warnings = _read("#BSUB -app pytorch -oo out.%J -Ep 'echo done'\n#XCE --app-param EPOCHS=3\n")
    assert opts == {"app": "pytorch", "stdout_overwrite": "out.%J", "post_exec": "echo done",
                    "app_params": ["EPOCHS=3"]}
    assert warnings == []
    assert _read("#XCE --eo err.%J\n")[0] == {"stderr_overwrite": "err.%J"}
    assert _read("#XCE -a pytorch\n")[0] == {"app": "pytorch"}


def test_a_prefix_must_be_a_word_of_its_own():
    """`#BSUBX` or `# BSUB` or a lower-case `#bsub` is a comment, as in LSF (upper case,
    at the line's start); an indented `#BSUB` is not read either, and said."""
    assert _read("#BSUBX -n 2\n# BSUB -n 2\n#bsub -n 2\n#XCEL -n 2\n")[0] == {}
    assert _read("  #BSUB -n 2\n") == ({}, {}, ["job.lsf:1: #BSUB -n 2: not read: a directive starts at the "
                                                "beginning of its line; remove the blanks before it"])


@pytest.mark.parametrize("line, says", [
    ("#BSUB -n x", "job.lsf:2: #BSUB -n x: -n 'x': expected MIN or MIN,MAX with integers"),
    ("#BSUB -W soon", "job.lsf:2: #BSUB -W soon: -W 'soon': "),
    ("#BSUB -Q 3", "job.lsf:2: #BSUB -Q 3: -Q (requeue exit values) is not supported by XCE"),
    ("#BSUB -K", "job.lsf:2: #BSUB -K: -K is taken on the bsub command line only"),
    ("#BSUB -env none", "job.lsf:2: #BSUB -env none: -env is taken on the bsub command line only"),
    ("#BSUB -n", "job.lsf:2: #BSUB -n: -n: not an option this command takes, or its value is missing"),
    ("#BSUB", "job.lsf:2: #BSUB: the directive gives no option"),
    ("#BSUB ./run.sh", "job.lsf:2: #BSUB ./run.sh: './run.sh' is not an option: a directive gives options only"),
    ("#BSUB -J 'open", "job.lsf:2: #BSUB -J 'open: a quote opened on the line is not closed"),
    ("#XCE --dry-run", "job.lsf:2: #XCE --dry-run: --dry-run says how the command runs, not what the job is"),
    ("#XCE --preset x", "job.lsf:2: #XCE --preset x: --preset says how the command runs"),
    ("#XCE -n", "job.lsf:2: #XCE -n: -n: not an option of xcecli submit, or its value is missing"),
    ("#XCE --env 1X=2", "job.lsf:2: #XCE --env 1X=2: --env '1X=2': expected NAME=VALUE"),
])
def test_a_bad_directive_names_the_script_and_its_line(line, says):
    with pytest.raises(ScriptError) as e:
        _read(f"#!/bin/sh\n{line}\necho\n")
    assert e.value.message.startswith(says), e.value.message


def test_the_interpreter_of_a_hash_bang_line():
    """As Linux's execve reads `#!`: the path, then at most one argument, the rest of the line."""
    assert interpreter("#!/bin/bash") == ["/bin/bash"]
    assert interpreter("#! /usr/bin/env python3") == ["/usr/bin/env", "python3"]
    assert interpreter("#!/usr/bin/env -S python3 -u  ") == ["/usr/bin/env", "-S python3 -u"]
    assert interpreter("echo hi") is None
    assert run_with("echo hi\n") == ["/bin/sh"] and run_with("\ufeff#!/bin/bash\r\necho\n") == ["/bin/bash"]
    with pytest.raises(ScriptError, match="'#!' names no interpreter"):
        run_with("#!\necho\n")
