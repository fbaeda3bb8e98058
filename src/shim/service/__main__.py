"""``python -m shim.service serve|info|status|stop``"""

if __name__ == "__main__":
    import sys

    from .server import main

    sys.exit(main())
