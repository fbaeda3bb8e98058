"""``python -m shim.agent serve|ping|stop``: the submit agent's command line, kept at its old
name for admins and scripts. The agent is ``shim.gridengine.agent``."""

import sys

if __name__ == "__main__":
    from shim.gridengine.agent import main

    sys.exit(main())
