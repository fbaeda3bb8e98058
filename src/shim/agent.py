"""``python -m shim.agent serve|ping|stop``: the former submit agent's command line, kept at its old
name for admins' scripts until the release after 2027-06. Since issue 28 the agent is a kind of
request of the one per-user daemon (service/server.py, docs/service.md): this name runs the
daemon's own command line, ``python -m shim.service``, with the same arguments and interpreter
flags (an exec, not an import: the entry points sit below service/ in the layers)."""

import os
import sys

if __name__ == "__main__":
    from shim import proc

    flags = ["-I"] if sys.flags.isolated else []
    proc.execvpe([sys.executable, *flags, "-m", "shim.service", *sys.argv[1:]], os.environ)
