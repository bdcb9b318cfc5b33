package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/** How long and how much each measurement runs; the same options on the harness's and the client's command line. */
final class Settings {
    /** Message sizes in bytes. */
    int[] sizes = {64, 4096, 65536, 1 << 20};
    /** Connection counts of the throughput runs. */
    int[] connections = {1, 8};
    /**
     * Message sizes of the fresh-buffer streams (each message its own buffer and promise, a flush every 64 writes,
     * sequence numbers checked by the sink), beside the slices of the other throughput rows; empty: none.
     */
    int[] freshSizes = {64, 1024};
    /** Seconds of echoes before each size's measured ones. */
    double latencyWarmup = 2;
    /** Seconds of measured echoes per size. */
    double latency = 5;
    /** At most this many measured echoes per size. */
    long latencyMaxCount = 1_000_000;
    /**
     * Seconds of streaming before each measured stream: with two JVMs and their JIT compilers on two cores, 1 s
     * left the 64 B rows still compiling (RDMA's 64 B stream: about 3 M msg/s after 1 s, 4.6–4.9 M after 3 s).
     */
    double throughputWarmup = 3;
    /** Seconds of one measured stream. */
    double throughput = 3;
    /** Seconds over which the idle adaptive loop's CPU is measured; 0: not measured. */
    double idleSeconds = 10;
    /** Event loop threads on each side. */
    int threads = 1;

    /** Shorter runs: a first look in about a quarter of the time. */
    private void quick() {
        latencyWarmup = 0.5;
        latency = 1;
        throughputWarmup = 0.3;
        throughput = 1;
        idleSeconds = 3;
    }

    /** Takes the options this class knows ({@code --quick} first) and leaves the others in {@code unknown}. */
    static Settings parse(String[] args, List<String> unknown) {
        Settings s = new Settings();
        if (Arrays.asList(args).contains("--quick")) {
            s.quick();
        }
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--quick" -> { }
                case "--sizes" -> s.sizes = ints(value(args, ++i, a));
                case "--connections" -> s.connections = ints(value(args, ++i, a));
                case "--fresh-sizes" -> {
                    s.freshSizes = ints(value(args, ++i, a));
                    if (Arrays.stream(s.freshSizes).anyMatch(v -> v < Long.BYTES)) {
                        throw new IllegalArgumentException("--fresh-sizes: a fresh message carries an 8-byte "
                                + "sequence number, so at least 8 bytes: " + join(s.freshSizes));
                    }
                }
                case "--latency-warmup" -> s.latencyWarmup = seconds(value(args, ++i, a));
                case "--latency-seconds" -> s.latency = seconds(value(args, ++i, a));
                case "--latency-max-count" -> s.latencyMaxCount = Long.parseLong(value(args, ++i, a));
                case "--throughput-warmup" -> s.throughputWarmup = seconds(value(args, ++i, a));
                case "--throughput-seconds" -> s.throughput = seconds(value(args, ++i, a));
                case "--idle-seconds" -> s.idleSeconds = seconds(value(args, ++i, a));
                case "--threads" -> s.threads = Integer.parseInt(value(args, ++i, a));
                default -> unknown.add(a);
            }
        }
        return s;
    }

    static Settings parse(String[] args) {
        List<String> unknown = new ArrayList<>();
        Settings s = parse(args, unknown);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown options " + unknown);
        }
        return s;
    }

    /**
     * These settings cut into one run per message size, then one per fresh-buffer size, in that order, so that a
     * harness can run every transport on one size before it moves to the next: rows compared with each other then
     * ran minutes apart at most, not the whole run apart (this VM's speed changes by up to 2× from one minute to
     * the next). The idle measurement goes with the last slice.
     */
    List<Settings> slices() {
        List<Settings> slices = new ArrayList<>();
        for (int size : sizes) {
            slices.add(copy(new int[] {size}, new int[0]));
        }
        for (int size : freshSizes) {
            slices.add(copy(new int[0], new int[] {size}));
        }
        if (slices.isEmpty()) {
            slices.add(copy(new int[0], new int[0]));
        }
        for (int i = 0; i < slices.size() - 1; i++) {
            slices.get(i).idleSeconds = 0;
        }
        return slices;
    }

    private Settings copy(int[] sizes, int[] freshSizes) {
        Settings s = new Settings();
        s.sizes = sizes;
        s.connections = connections;
        s.freshSizes = freshSizes;
        s.latencyWarmup = latencyWarmup;
        s.latency = latency;
        s.latencyMaxCount = latencyMaxCount;
        s.throughputWarmup = throughputWarmup;
        s.throughput = throughput;
        s.idleSeconds = idleSeconds;
        s.threads = threads;
        return s;
    }

    /** The command line that makes {@link #parse} return these settings. */
    List<String> toArgs() {
        return List.of("--sizes", join(sizes), "--connections", join(connections), "--fresh-sizes", join(freshSizes),
                "--latency-warmup", num(latencyWarmup), "--latency-seconds", num(latency),
                "--latency-max-count", Long.toString(latencyMaxCount),
                "--throughput-warmup", num(throughputWarmup), "--throughput-seconds", num(throughput),
                "--idle-seconds", num(idleSeconds), "--threads", Integer.toString(threads));
    }

    long latencyWarmupNanos() {
        return (long) (latencyWarmup * 1e9);
    }

    long latencyNanos() {
        return (long) (latency * 1e9);
    }

    long throughputWarmupNanos() {
        return (long) (throughputWarmup * 1e9);
    }

    long throughputNanos() {
        return (long) (throughput * 1e9);
    }

    static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }

    private static int[] ints(String csv) {
        if (csv.isBlank()) {
            return new int[0];
        }
        int[] values = Arrays.stream(csv.split(",")).mapToInt(v -> Integer.parseInt(v.trim())).toArray();
        for (int v : values) {
            if (v <= 0) {
                throw new IllegalArgumentException("expected positive numbers, got " + csv);
            }
        }
        return values;
    }

    private static double seconds(String v) {
        double d = Double.parseDouble(v);
        if (d < 0) {
            throw new IllegalArgumentException("seconds must not be negative: " + v);
        }
        return d;
    }

    private static String join(int[] values) {
        return String.join(",", Arrays.stream(values).mapToObj(Integer::toString).toList());
    }

    private static String num(double v) {
        return String.format(Locale.ROOT, "%s", v);
    }
}
