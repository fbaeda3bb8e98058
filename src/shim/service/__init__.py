"""The warm service (server.py): one process per user that answers the user's commands.

``from shim.service import main`` (and ``client``) is the name C clients compiled before the layers became folders
exec to start a service (client.c's start_service), so it stays here."""


def main(argv: list[str] | None = None) -> int:
    from .server import main as serve

    return serve(argv)


def client(cmd: str, argv: list[str] | None = None) -> None:
    """The Python thin client (``from shim.service import client``), as before the move."""
    from .server import client as run

    run(cmd, argv)
