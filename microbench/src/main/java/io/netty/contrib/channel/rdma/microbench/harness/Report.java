package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.contrib.channel.rdma.microbench.harness.Results.Series;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import static io.netty.contrib.channel.rdma.microbench.harness.Results.ratio;
import static io.netty.contrib.channel.rdma.microbench.harness.Results.sizeName;

/** The Markdown tables of a run: round trips, throughput, ratios, and the goals. */
final class Report {
    static final double GOAL_RTT_RATIO = 1.15;
    static final double GOAL_THROUGHPUT_SHARE = 0.90;
    static final int GOAL_THROUGHPUT_SIZE = 65536;
    static final double GOAL_HEAP_PER_ECHO = 1.0;
    static final double GOAL_IDLE_CPU = 5.0;

    private final Results r;
    private final StringBuilder b = new StringBuilder();

    private Report(Results results) {
        this.r = results;
    }

    static String tables(Results results) {
        Report report = new Report(results);
        report.latency();
        report.throughput();
        report.receiverCpu();
        report.freshThroughput();
        report.ratios();
        report.goals();
        return report.b.toString();
    }

    private void latency() {
        b.append("### Echo round trip\n\n");
        b.append("One message in flight on one connection; microseconds from write to the last byte of the echo."
                + " Heap: bytes allocated per echo by the event loop threads of the server and of the client."
                + " CPU: microseconds of CPU the loop threads of server / client used per echo (a busy-polling"
                + " loop uses all it gets). Sleeps: how often per echo the loop threads of server / client blocked"
                + " and had to be woken (voluntary context switches).\n\n");
        row("transport", "size", "p50 (µs)", "p99 (µs)", "p99.9 (µs)", "echoes", "heap/echo server (B)",
                "heap/echo client (B)", "CPU/echo (µs)", "sleeps/echo");
        row("---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:");
        for (Series s : Results.LATENCY) {
            for (int size : r.sizes()) {
                Double p50 = r.get(s, size, 1, "rtt_p50");
                if (p50 == null) {
                    continue;
                }
                row(s.label(), sizeName(size), num(p50), num(r.get(s, size, 1, "rtt_p99")),
                        num(r.get(s, size, 1, "rtt_p99_9")), count(r.get(s, size, 1, "echoes")),
                        num(r.get(s, size, 1, "heap_per_echo_server")), num(r.get(s, size, 1, "heap_per_echo_client")),
                        pair(r.get(s, size, 1, "cpu_per_echo_server"), r.get(s, size, 1, "cpu_per_echo_client")),
                        sleeps(r.get(s, size, 1, "loop_sleeps_per_echo_server"),
                                r.get(s, size, 1, "loop_sleeps_per_echo_client")));
            }
        }
        b.append('\n');
    }

    private void throughput() {
        List<Integer> conns = r.throughputConnections();
        b.append("### Streaming throughput\n\n");
        b.append("One way, as fast as the receiver takes it; messages per second and GB/s (10^9 bytes).\n\n");
        List<String> header = new ArrayList<>(List.of("transport", "size"));
        List<String> align = new ArrayList<>(List.of("---", "---:"));
        for (int c : conns) {
            header.add(c + " conn msg/s");
            header.add(c + " conn GB/s");
            align.add("---:");
            align.add("---:");
        }
        row(header.toArray(String[]::new));
        row(align.toArray(String[]::new));
        for (Series s : Results.THROUGHPUT) {
            for (int size : r.sizes()) {
                List<String> cells = new ArrayList<>(List.of(s.label(), sizeName(size)));
                boolean any = false;
                for (int c : conns) {
                    Double msgs = r.get(s, size, c, "throughput_msgs");
                    any |= msgs != null;
                    cells.add(count(msgs));
                    cells.add(num(r.get(s, size, c, "throughput_bytes")));
                }
                if (any) {
                    row(cells.toArray(String[]::new));
                }
            }
        }
        b.append('\n');
    }

    /** The sink's loop CPU per GB received while streaming, beside epoll's (the offload shows here). */
    private void receiverCpu() {
        List<Integer> conns = r.throughputConnections();
        List<String[]> rows = new ArrayList<>();
        for (Series s : Results.THROUGHPUT) {
            for (int size : r.sizes()) {
                List<String> cells = new ArrayList<>(List.of(s.label(), sizeName(size)));
                boolean any = false;
                for (int c : conns) {
                    Double ms = r.get(s, size, c, "receiver_cpu_per_gb");
                    any |= ms != null;
                    cells.add(num(ms));
                    cells.add(times(ratioTo(s, Results.EPOLL, size, c, "receiver_cpu_per_gb")));
                }
                if (any) {
                    rows.add(cells.toArray(String[]::new));
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        b.append("### Receiving loop CPU per GB, streaming\n\n");
        b.append("CPU milliseconds the sink's event loop threads used per 10^9 bytes received in the streaming rows"
                + " above (a busy-polling loop uses all it gets), and the ratio to epoll's.\n\n");
        List<String> header = new ArrayList<>(List.of("transport", "size"));
        List<String> align = new ArrayList<>(List.of("---", "---:"));
        for (int c : conns) {
            header.add(c + " conn ms/GB");
            header.add(c + " conn ÷ epoll");
            align.add("---:");
            align.add("---:");
        }
        row(header.toArray(String[]::new));
        row(align.toArray(String[]::new));
        for (String[] cells : rows) {
            row(cells);
        }
        b.append('\n');
    }

    /** The fresh-buffer streams (the pattern applications write) beside epoll's, when the run measured them. */
    private void freshThroughput() {
        List<Integer> conns = r.throughputConnections();
        List<String[]> rows = new ArrayList<>();
        for (Series s : Results.THROUGHPUT) {
            for (int size : r.freshSizes()) {
                List<String> cells = new ArrayList<>(List.of(s.label(), sizeName(size)));
                boolean any = false;
                for (int c : conns) {
                    Double msgs = r.get(s, size, c, "fresh_throughput_msgs");
                    any |= msgs != null;
                    cells.add(count(msgs));
                    cells.add(times(ratioTo(s, Results.EPOLL, size, c, "fresh_throughput_msgs")));
                }
                if (any) {
                    rows.add(cells.toArray(String[]::new));
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        b.append("### Streaming throughput, fresh buffers\n\n");
        b.append("As applications write: each message a fresh `ctx.alloc().buffer()` carrying its sequence number,"
                + " written with its own promise, a flush every 64 writes; the sink frames the messages with a"
                + " decoder and checks every sequence number.\n\n");
        List<String> header = new ArrayList<>(List.of("transport", "size"));
        List<String> align = new ArrayList<>(List.of("---", "---:"));
        for (int c : conns) {
            header.add(c + " conn msg/s");
            header.add(c + " conn ÷ epoll");
            align.add("---:");
            align.add("---:");
        }
        row(header.toArray(String[]::new));
        row(align.toArray(String[]::new));
        rows.forEach(this::row);
        b.append('\n');
    }

    private void ratios() {
        List<Integer> conns = r.throughputConnections();
        b.append("### Ratios\n\n");
        b.append("Round trip: RdmaChannel ÷ other (lower is better); verbs is `ib_send_lat` busy-polling, the floor"
                + " of the goal; verbs -e is `ib_send_lat -e`, waiting for completion events as an adaptive loop does"
                + " once it blocks. Throughput: RdmaChannel ÷ other (higher is better); raw verbs is `ib_send_bw` up to " + Results.LARGEST_SEND + " B (the transport"
                + " SENDs those) and `ib_write_bw` above (ring writes).\n\n");
        List<String> header = new ArrayList<>(List.of("RdmaChannel", "size", "RTT p50 ÷ verbs", "RTT p99 ÷ verbs",
                "RTT p50 ÷ verbs -e"));
        for (int c : conns) {
            header.add("tput ÷ verbs (" + c + " conn)");
        }
        header.add("RTT p50 ÷ epoll");
        for (int c : conns) {
            header.add("tput ÷ epoll (" + c + " conn)");
        }
        row(header.toArray(String[]::new));
        List<String> align = new ArrayList<>(List.of("---", "---:"));
        while (align.size() < header.size()) {
            align.add("---:");
        }
        row(align.toArray(String[]::new));
        for (Series s : Results.RDMA) {
            if (!r.has(s)) {
                continue;
            }
            for (int size : r.sizes()) {
                List<String> cells = new ArrayList<>(List.of(s.mode(), sizeName(size)));
                cells.add(times(ratioTo(s, Results.VERBS_SEND_LAT, size, 1, "rtt_p50")));
                cells.add(times(ratioTo(s, Results.VERBS_SEND_LAT, size, 1, "rtt_p99")));
                cells.add(times(ratioTo(s, Results.VERBS_SEND_LAT_EVENTS, size, 1, "rtt_p50")));
                for (int c : conns) {
                    cells.add(percent(ratioTo(s, Results.verbsThroughputFor(size), size, c, "throughput_bytes")));
                }
                cells.add(times(ratioTo(s, Results.EPOLL, size, 1, "rtt_p50")));
                for (int c : conns) {
                    cells.add(percent(ratioTo(s, Results.EPOLL, size, c, "throughput_bytes")));
                }
                row(cells.toArray(String[]::new));
            }
        }
        b.append('\n');
    }

    private void goals() {
        b.append("### Goals (issues 6 and 14)\n\n");
        row("goal", "RdmaChannel", "measured", "met");
        row("---", "---", "---", "---");
        goal("echo RTT p50 ≤ " + GOAL_RTT_RATIO + " × raw verbs", r.sizes(), (s, size) -> {
            Double q = ratioTo(s, Results.VERBS_SEND_LAT, size, 1, "rtt_p50");
            return q == null ? null : new Check(sizeName(size) + " " + times(q)
                    + each(s, Results.VERBS_SEND_LAT, size, 1, "rtt_p50", Report::times), q <= GOAL_RTT_RATIO);
        });
        goal("64 KiB throughput ≥ " + Math.round(GOAL_THROUGHPUT_SHARE * 100) + " % of raw verbs",
                r.throughputConnections(), (s, c) -> {
                    Double q = ratioTo(s, Results.VERBS_WRITE_BW, GOAL_THROUGHPUT_SIZE, c, "throughput_bytes");
                    return q == null ? null : new Check(c + " conn " + percent(q) + each(s, Results.VERBS_WRITE_BW,
                            GOAL_THROUGHPUT_SIZE, c, "throughput_bytes", Report::percent), q >= GOAL_THROUGHPUT_SHARE);
                });
        goal("≈ 0 B heap per echo (server / client loop)", r.sizes(), (s, size) -> {
            Double server = r.get(s, size, 1, "heap_per_echo_server");
            Double client = r.get(s, size, 1, "heap_per_echo_client");
            return server == null || client == null ? null
                    : new Check(sizeName(size) + " " + num(server) + " / " + num(client) + " B",
                            server < GOAL_HEAP_PER_ECHO && client < GOAL_HEAP_PER_ECHO);
        });
        // Issue 14: small messages stream at least as fast as over epoll, between two JVMs (this page).
        goal("64 B streaming ≥ Netty epoll (issue 14)", r.throughputConnections(), (s, c) -> {
            Double q = ratioTo(s, Results.EPOLL, 64, c, "throughput_msgs");
            return q == null ? null : new Check(c + " conn " + percent(q)
                    + each(s, Results.EPOLL, 64, c, "throughput_msgs", Report::percent), q >= 1);
        });
        for (int[] goal : new int[][] {{64, 120}, {1024, 100}}) {
            int size = goal[0];
            double least = goal[1] / 100.0;
            goal("fresh-buffer " + sizeName(size) + " streaming ≥ " + times(least) + " Netty epoll (issue 26)",
                    r.throughputConnections(), (s, c) -> {
                        Double q = ratioTo(s, Results.EPOLL, size, c, "fresh_throughput_msgs");
                        return q == null ? null : new Check(c + " conn " + times(q)
                                + each(s, Results.EPOLL, size, c, "fresh_throughput_msgs", Report::times), q >= least);
                    });
        }
        Double idle = r.get(Results.RDMA_ADAPTIVE, 0, 1, "idle_cpu_loop_server");
        if (idle != null) {
            row("idle adaptive loop < " + num(GOAL_IDLE_CPU) + " % of a core", "adaptive",
                    num(idle) + " % (server loop; whole server JVM "
                            + num(r.get(Results.RDMA_ADAPTIVE, 0, 1, "idle_cpu_process_server")) + " %, client loop "
                            + num(r.get(Results.RDMA_ADAPTIVE, 0, 1, "idle_cpu_loop_client")) + " %)",
                    verdict(true, idle < GOAL_IDLE_CPU));
        }
        b.append('\n');
    }

    /**
     * {@code metric} of {@code s} over {@code base}'s: the median of the ratios within each repeat (the two rows of
     * a repeat ran minutes apart at most, the repeats up to an hour apart).
     */
    private Double ratioTo(Series s, Series base, int size, int connections, String metric) {
        return r.median(x -> ratio(x.get(s, size, connections, metric), x.get(base, size, connections, metric)));
    }

    /** Each repeat's ratio of {@link #ratioTo}, in parentheses; nothing when the run was not repeated. */
    private String each(Series s, Series base, int size, int connections, String metric,
                        java.util.function.Function<Double, String> format) {
        if (r.repeatCount() == 1) {
            return "";
        }
        List<String> parts = r.each(x -> ratio(x.get(s, size, connections, metric),
                x.get(base, size, connections, metric))).stream().map(format).toList();
        return parts.isEmpty() ? "" : " (" + String.join(", ", parts) + ")";
    }

    /** What one size or connection count measured for a goal, and whether it meets it. */
    private record Check(String text, boolean met) {
    }

    /**
     * One row per RDMA series measured: {@code check} gives each key's part (null when not measured); the goal is
     * met when every measured part meets it.
     */
    private void goal(String label, List<Integer> keys, java.util.function.BiFunction<Series, Integer, Check> check) {
        for (Series s : Results.RDMA) {
            if (!r.has(s)) {
                continue;
            }
            List<String> parts = new ArrayList<>();
            boolean met = true;
            for (int key : keys) {
                Check c = check.apply(s, key);
                if (c != null) {
                    met &= c.met();
                    parts.add(c.text());
                }
            }
            row(label, s.mode(), String.join(", ", parts), verdict(!parts.isEmpty(), met));
        }
    }

    private void row(String... cells) {
        b.append("| ").append(String.join(" | ", cells)).append(" |\n");
    }

    private static String verdict(boolean any, boolean met) {
        return !any ? "not measured" : met ? "yes" : "**no**";
    }

    /** Three significant digits, without exponent. */
    static String num(Double v) {
        if (v == null) {
            return "–";
        }
        double a = Math.abs(v);
        if (a >= 100 || a == 0) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        if (a >= 10) {
            return String.format(Locale.ROOT, "%.1f", v);
        }
        if (a >= 1) {
            return String.format(Locale.ROOT, "%.2f", v);
        }
        return String.format(Locale.ROOT, "%.3f", v);
    }

    private static String num(double v) {
        return num(Double.valueOf(v));
    }

    private static String pair(Double server, Double client) {
        return server == null || client == null ? "–" : num(server) + " / " + num(client);
    }

    private static String sleeps(Double server, Double client) {
        return server == null || client == null ? "–" : String.format(Locale.ROOT, "%.2f / %.2f", server, client);
    }

    private static String count(Double v) {
        return v == null ? "–" : String.format(Locale.ROOT, "%,.0f", v);
    }

    private static String times(Double v) {
        return v == null ? "–" : String.format(Locale.ROOT, "%.2f×", v);
    }

    private static String percent(Double v) {
        return v == null ? "–" : String.format(Locale.ROOT, "%.0f %%", v * 100);
    }
}
