"""One helper for worker processes: end with the process that started them (no orphans)."""
import os
import threading
import time


def exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this worker if the process that started it (pid ``parent_pid``) ends or is killed."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()
