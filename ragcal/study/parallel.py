"""Independent parts of the study in separate processes, with the same bits as one after the other.

``make reproduce`` spends most of its time in work that does not depend on
other work: one bundled corpus's study and another's, one notebook and the
next. :func:`run_in_processes` runs such tasks in ``jobs`` fresh (spawned)
processes and returns their results in the order of the tasks, so what is
written does not depend on which finished first.

The bits do not depend on it either. Every split, resample and draw takes its
seed from its position, never from a shared generator, and each process
splits the cores between torch and the BLAS (``threads`` each, through
threadpoolctl): a MiniLM vector is the same bits with 1 thread or 2 (checked
on this study's texts), and ``tests/test_parallel.py`` checks that a task
gives the same result in a process as in the caller.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed

__all__ = ["THREAD_VARIABLES", "default_jobs", "run_in_processes"]

#: The environment variables that size torch's, MKL's and OpenBLAS's thread pools in a process started afterwards.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def default_jobs() -> int:
    """The cores this process may use (``os.sched_getaffinity`` where there is one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _limit_threads(threads: int) -> None:
    """In each worker: ``threads`` threads for torch and for every BLAS / OpenMP pool, its own and its children's.

    The environment carries the limit to the processes a worker starts (a notebook's kernel): with their default
    pools, two kernels at once on two cores took the cores from each other (OpenBLAS's idle threads spin).
    """
    from threadpoolctl import threadpool_limits

    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)

    global _LIMITS
    _LIMITS = threadpool_limits(limits=threads)  # kept for the worker's life
    import torch

    torch.set_num_threads(threads)


_LIMITS = None


def run_in_processes(tasks, *, jobs: int, on_done=None) -> list:
    """Run ``(function, args, kwargs)`` tasks in up to ``jobs`` processes; their results in the tasks' order.

    Parameters
    ----------
    tasks : sequence of (callable, tuple, dict)
        Each function must be importable by name (a module-level function)
        and its arguments and result picklable.
    jobs : int
        Processes at most. With one job, or one task, everything runs here,
        in this process.
    on_done : callable, default=None
        Called here as ``on_done(position, result)`` as each task finishes (in
        the order they finish): a progress line per task.

    Returns
    -------
    list
        ``function(*args, **kwargs)`` of each task. The first task that
        raises stops the others, and its error is raised here.
    """
    tasks = list(tasks)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs must be a positive int. Got {jobs!r} instead.")
    workers = min(jobs, len(tasks))
    if workers <= 1:
        results = []
        for position, (function, args, kwargs) in enumerate(tasks):
            results.append(function(*args, **kwargs))
            if on_done is not None:
                on_done(position, results[-1])
        return results
    threads = max(1, default_jobs() // workers)
    context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch's threads
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_limit_threads, initargs=(threads,)) as pool:
        futures = [pool.submit(function, *args, **kwargs) for function, args, kwargs in tasks]
        try:
            if on_done is not None:
                positions = {future: position for position, future in enumerate(futures)}
                for future in as_completed(futures):
                    on_done(positions[future], future.result())
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
