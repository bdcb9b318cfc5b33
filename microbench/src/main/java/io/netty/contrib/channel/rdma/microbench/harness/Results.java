package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.function.Function;

/** The measurements of one run, looked up by what they measured: medians when the run was repeated. */
final class Results {
    /** A transport in one mode: one row group of the tables, one colour of the chart. */
    record Series(String transport, String mode, String label) {
    }

    static final Series RDMA_ADAPTIVE = new Series("rdma", "adaptive", "RdmaChannel (adaptive)");
    static final Series RDMA_BUSY_POLL = new Series("rdma", "busy-poll", "RdmaChannel (busy-poll)");
    static final Series VERBS_SEND_LAT = new Series("verbs", "ib_send_lat", "raw verbs (ib_send_lat)");
    static final Series VERBS_SEND_LAT_EVENTS = new Series("verbs", "ib_send_lat-events",
            "raw verbs (ib_send_lat -e)");
    static final Series VERBS_SEND_BW = new Series("verbs", "ib_send_bw", "raw verbs (ib_send_bw)");
    static final Series VERBS_WRITE_BW = new Series("verbs", "ib_write_bw", "raw verbs (ib_write_bw)");
    static final Series EPOLL = new Series("epoll", "tcp", "Netty epoll (TCP)");
    static final Series NIO = new Series("nio", "tcp", "Netty NIO (TCP)");

    static final List<Series> LATENCY = List.of(RDMA_ADAPTIVE, RDMA_BUSY_POLL, VERBS_SEND_LAT, VERBS_SEND_LAT_EVENTS,
            EPOLL, NIO);
    static final List<Series> THROUGHPUT = List.of(RDMA_ADAPTIVE, RDMA_BUSY_POLL, VERBS_SEND_BW, VERBS_WRITE_BW,
            EPOLL, NIO);
    static final List<Series> RDMA = List.of(RDMA_ADAPTIVE, RDMA_BUSY_POLL);

    /**
     * The transport sends writes up to its receive buffer size (8 KiB less an 8-byte header by default) as SEND
     * and larger ones as RDMA WRITE WITH IMMEDIATE: the raw verbs row of the same operation is its floor.
     */
    static final int LARGEST_SEND = 8192 - 8;

    /** Each repeat's measurements ({@code --repeat}): one list when the run was not repeated. */
    private final List<List<Result>> repeats;
    private final List<Result> all;

    private Results(List<List<Result>> repeats) {
        this.repeats = repeats.stream().map(List::copyOf).toList();
        this.all = this.repeats.stream().flatMap(List::stream).toList();
    }

    /** The measurements of a run repeated {@code repeats.size()} times, each repeat's in its own list. */
    static Results ofRepeats(List<List<Result>> repeats) {
        if (repeats.isEmpty()) {
            throw new IllegalArgumentException("no repeats");
        }
        return new Results(repeats);
    }

    /** Every measurement of every repeat. */
    List<Result> all() {
        return all;
    }

    int repeatCount() {
        return repeats.size();
    }

    /** The measurements of repeat {@code i} alone. */
    Results repeat(int i) {
        return new Results(List.of(repeats.get(i)));
    }

    /** The value, the median over the repeats that measured it; null when none did. */
    Double get(Series s, int size, int connections, String metric) {
        List<Double> values = new ArrayList<>();
        for (List<Result> repeat : repeats) {
            for (Result r : repeat) {
                if (r.transport().equals(s.transport()) && r.mode().equals(s.mode()) && r.size() == size
                        && r.connections() == connections && r.metric().equals(metric)) {
                    values.add(r.value());
                    break;
                }
            }
        }
        return median(values);
    }

    /**
     * {@code f} of each repeat (a ratio of two rows measured side by side, say), those that are not null: one
     * value when the run was not repeated.
     */
    List<Double> each(Function<Results, Double> f) {
        if (repeats.size() == 1) {
            Double v = f.apply(this);
            return v == null ? List.of() : List.of(v);
        }
        List<Double> values = new ArrayList<>();
        for (int i = 0; i < repeats.size(); i++) {
            Double v = f.apply(repeat(i));
            if (v != null) {
                values.add(v);
            }
        }
        return values;
    }

    /**
     * The median of {@code f} over the repeats: for a ratio, the median of the ratios taken within each repeat,
     * not the ratio of two medians measured minutes apart.
     */
    Double median(Function<Results, Double> f) {
        return median(each(f));
    }

    static Double median(List<Double> values) {
        if (values.isEmpty()) {
            return null;
        }
        List<Double> sorted = values.stream().sorted().toList();
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    boolean has(Series s) {
        return all.stream().anyMatch(r -> r.transport().equals(s.transport()) && r.mode().equals(s.mode()));
    }

    /** The raw verbs series that does what the transport does at {@code size}. */
    static Series verbsThroughputFor(int size) {
        return size <= LARGEST_SEND ? VERBS_SEND_BW : VERBS_WRITE_BW;
    }

    /** The sizes of every measurement but the fresh-buffer streams ({@link #freshSizes()}). */
    List<Integer> sizes() {
        TreeSet<Integer> sizes = new TreeSet<>();
        for (Result r : all) {
            if (r.size() > 0 && !r.metric().startsWith("fresh_")) {
                sizes.add(r.size());
            }
        }
        return new ArrayList<>(sizes);
    }

    /** The sizes of the fresh-buffer streams. */
    List<Integer> freshSizes() {
        TreeSet<Integer> sizes = new TreeSet<>();
        for (Result r : all) {
            if (r.metric().startsWith("fresh_")) {
                sizes.add(r.size());
            }
        }
        return new ArrayList<>(sizes);
    }

    List<Integer> throughputConnections() {
        TreeSet<Integer> connections = new TreeSet<>();
        for (Result r : all) {
            if (r.metric().startsWith("throughput")) {
                connections.add(r.connections());
            }
        }
        return new ArrayList<>(connections);
    }

    /** {@code a / b}, or null when either is missing. */
    static Double ratio(Double a, Double b) {
        return a == null || b == null || b == 0 ? null : a / b;
    }

    static String sizeName(int size) {
        if (size >= 1 << 20 && size % (1 << 20) == 0) {
            return (size >> 20) + " MiB";
        }
        if (size >= 1024 && size % 1024 == 0) {
            return (size >> 10) + " KiB";
        }
        return size + " B";
    }
}
