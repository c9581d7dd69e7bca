"""The command line: ``python -m arig info | demo | top``.

Each command runs on the main thread: it calls arig's blocking functions (``arig.cuda.count``,
``arig.nvrm``'s queries) outside any event loop, and drives devices from an event loop of its
own (``asyncio.run``), awaiting them as any other arig user does.
"""
