package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.List;

/** {@code docs/benchmarks.md}: how the numbers were made, on what, the chart and the tables. */
final class Page {
    private Page() {
    }

    static String text(String machine, boolean quick, List<String> failures, String chart, String tables) {
        StringBuilder b = new StringBuilder();
        b.append("""
                # Benchmarks

                Written by the end-to-end harness (`microbench/`, see `microbench/README.md`); do not edit by hand.
                Re-run it with

                    ./microbench/run.sh            # full run, about 12 minutes on 2 cores
                    ./microbench/run.sh --quick    # a first look, about 2–3 minutes

                Everything runs on one machine over 127.0.0.1, each side in its own JVM (or process), one event
                loop thread per side:

                - **RdmaChannel**: this transport on the bundled software RDMA device (`native/`), in both
                  `RdmaIoHandlerConfig` modes: *adaptive* (spin 50 µs, then block in `epoll_wait`) and
                  *busy-poll* (`RdmaIoHandlerConfig.spinning()`). Default channel options.
                - **raw verbs**: rdma-core's perftest on the same device and the same libraries, the floor:
                  `ib_send_lat` (reports half round trips; doubled here), `ib_send_bw` and `ib_write_bw`
                  (`-q N` queue pairs for N connections), busy-polling; and `ib_send_lat -e`, which waits for
                  completion events as the adaptive loop does once it has blocked.
                - **Netty epoll** and **Netty NIO** over TCP loopback, the same Netty version, the same handlers.

                Echo: the client writes one message, the server writes back what it reads, the client waits for
                every byte before sending again (the same buffer each time, so the handlers allocate nothing and
                the heap per echo is the transports', and Netty's: its leak detector runs at its default level,
                which tracks one buffer allocation in 128 and records the stack of each, about 1.5 KB, so some
                12 B per echo on a side that allocates one buffer per echo; RdmaChannel's loops allocate about
                0 B per echo without it, `--jvm-arg -Dio.netty.leakDetection.level=disabled`). Throughput: the
                client announces a byte count, streams messages while the channel is writable (water marks
                1–4 MiB on every transport), the server discards them and answers one byte at the end; the rate
                is measured after a warm-up.
                Loopback on a shared 2-core VM is noisy: compare rows of one run, not runs of different days.
                Every transport runs one size before any runs the next (a JVM pair per transport and size), so
                the rows of one size ran within minutes of each other.

                Between two processes the software device's wire hides the transport's own cost; the same echo and
                streaming between two loops of ONE JVM, next to raw verbs between two threads of one C process, are
                in [benchmarks/in-process.md](benchmarks/in-process.md) (`./microbench/in-process.sh`).

                """);
        b.append("## Machine\n\n").append(machine);
        if (quick) {
            b.append("\nThis run used `--quick`: shorter warm-ups and measurements.\n");
        }
        if (!failures.isEmpty()) {
            b.append("\nFailed in this run: ").append(String.join("; ", failures)).append('\n');
        }
        b.append("\n![latency and throughput by message size](").append(chart).append(")\n\n");
        b.append("## Results\n\n").append(tables);
        return b.toString();
    }
}
