"""Under trio, a reader removed is never called again, even where its fd became readable in the
same pass of the run: its owner may free what the reader reads right after the removal (an NV
device closes the epoll set its reader polls), as asyncio's ``remove_reader`` allows."""

from __future__ import annotations

import os

import trio

from arig._running import running_loop


def test_a_reader_removed_in_the_pass_its_fd_turned_readable_is_not_called() -> None:
    late: list[int] = []

    async def main() -> None:
        port = running_loop()
        r, w = os.pipe()
        os.set_blocking(r, False)
        removed = [False]

        def ready() -> None:
            if removed[0]:
                late.append(1)
            try:
                os.read(r, 64)
            except BlockingIOError:
                pass

        try:
            for _ in range(200):
                removed[0] = False
                port.add_reader(r, ready)
                await trio.sleep(0)  # the reader parks in its wait
                os.write(w, b"x")
                await trio.sleep(0)  # the poll at this pass's start finds the fd readable: the reader is due in this pass too
                port.remove_reader(r)
                removed[0] = True
                for _ in range(3):
                    await trio.sleep(0)
                try:
                    os.read(r, 64)
                except BlockingIOError:
                    pass
        finally:
            os.close(r)
            os.close(w)

    trio.run(main)
    assert late == [], f"a removed reader was called {len(late)} time(s) after its removal"
