package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/** The measurements of one run, looked up by what they measured. */
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

    private final List<Result> all;

    Results(List<Result> all) {
        this.all = List.copyOf(all);
    }

    List<Result> all() {
        return all;
    }

    /** The value, or null when it was not measured. */
    Double get(Series s, int size, int connections, String metric) {
        for (Result r : all) {
            if (r.transport().equals(s.transport()) && r.mode().equals(s.mode()) && r.size() == size
                    && r.connections() == connections && r.metric().equals(metric)) {
                return r.value();
            }
        }
        return null;
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
