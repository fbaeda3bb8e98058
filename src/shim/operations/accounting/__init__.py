"""sacct's accounting: what is selected (``query``), how the rows are found (``collect``: Grid
Engine's accounting file, the shim's records and events, the live queue), how each row is made
(``rows``) and the shim's events as sacct reads them (``events``). ``cli/sacct.py`` is the command
on top; ``render/sacct.py`` prints the rows."""
