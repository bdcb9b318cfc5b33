package io.netty.contrib.channel.rdma.microbench.harness;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Raw verbs on the same device, the floor: rdma-core's perftest ({@code ib_send_lat}, {@code ib_send_bw},
 * {@code ib_write_bw}) as two processes on 127.0.0.1, with {@code LD_LIBRARY_PATH} pointing at the libraries the
 * Java side loads. perftest busy-polls its completion queues.
 *
 * <p>{@code ib_send_lat} reports half round trips (its "rtt factor" is 2 for SEND): the rows here are doubled
 * into round trips, comparable to the echo. Bandwidth comes in MiB/s. Latency runs both busy-polling (the floor
 * of a busy-poll loop) and with {@code -e} (completion events: what an adaptive loop pays once it blocks).
 */
final class Perftest {
    private static final String DEVICE = "softrdma0";
    private static final long TIMEOUT_SECONDS = 120;

    private final Path libraryDir;
    private final Path workDir;
    private final boolean quick;

    /** {@code libraryDir}: where libibverbs.so.1 and librdmacm.so.1 are; null for the system's. */
    Perftest(Path libraryDir, Path workDir, boolean quick) {
        this.libraryDir = libraryDir;
        this.workDir = workDir;
        this.quick = quick;
    }

    /** Whether perftest is installed. */
    static boolean available() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            if (Files.isExecutable(Path.of(dir, "ib_send_lat"))) {
                return true;
            }
        }
        return false;
    }

    /**
     * {@code ib_send_lat}: echo round trips of one SEND each way, busy-polling, or with {@code events} waiting for
     * completion events ({@code -e}) as an adaptive loop does once it blocks.
     */
    List<Result> latency(int size, boolean events) throws IOException, InterruptedException {
        int iterations = size <= 4096 ? 20_000 : size <= 65536 ? 5_000 : 1_000;
        if (quick || events) {
            iterations /= 4;
        }
        String mode = events ? "ib_send_lat-events" : "ib_send_lat";
        String[] values = events ? run("ib_send_lat", size, 1, "-n", Integer.toString(iterations), "-e")
                : run("ib_send_lat", size, 1, "-n", Integer.toString(iterations));
        // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% [99.9%]
        List<Result> results = new ArrayList<>();
        results.add(latencyRow(mode, size, "rtt_p50", values[4]));
        results.add(latencyRow(mode, size, "rtt_p99", values[7]));
        if (values.length > 8) {
            results.add(latencyRow(mode, size, "rtt_p99_9", values[8]));
        }
        results.add(new Result("verbs", mode, size, 1, "echoes", iterations, "count"));
        return results;
    }

    private static Result latencyRow(String mode, int size, String metric, String halfRoundTrip) {
        return new Result("verbs", mode, size, 1, metric, 2 * Double.parseDouble(halfRoundTrip), "us");
    }

    /** {@code program} ({@code ib_send_bw} or {@code ib_write_bw}) for {@code seconds} over {@code qps} QPs. */
    List<Result> bandwidth(String program, int size, int qps, int seconds) throws IOException, InterruptedException {
        String[] values = run(program, size, qps, "-D", Integer.toString(Math.max(1, seconds)));
        // #bytes #iterations BW_peak BW_average[MiB/s] MsgRate[Mpps]
        double bytesPerSecond = Double.parseDouble(values[3]) * (1 << 20);
        return List.of(
                new Result("verbs", program, size, qps, "throughput_msgs", bytesPerSecond / size, "msg/s"),
                new Result("verbs", program, size, qps, "throughput_bytes", bytesPerSecond / 1e9, "GB/s"));
    }

    /** Runs server and client (again once if that fails); returns the numbers of the client's result line. */
    private String[] run(String program, int size, int qps, String... extra) throws IOException,
            InterruptedException {
        try {
            return runOnce(program, size, qps, extra);
        } catch (IOException e) {
            System.err.println(e.getMessage() + "\ntrying once more");
            Thread.sleep(2000);
            return runOnce(program, size, qps, extra);
        }
    }

    private String[] runOnce(String program, int size, int qps, String... extra) throws IOException,
            InterruptedException {
        int port = freePort();
        List<String> common = new ArrayList<>(List.of(program, "-d", DEVICE, "-x", "0", "-F",
                "-s", Integer.toString(size), "-p", Integer.toString(port)));
        if (qps > 1) {
            common.addAll(List.of("-q", Integer.toString(qps)));
        }
        common.addAll(Arrays.asList(extra));
        Path serverLog = workDir.resolve(program + "-server.log");
        Path clientLog = workDir.resolve(program + "-client.log");
        // perftest's stdout is a file here: line-buffer it, or "Waiting for client" comes only at exit.
        List<String> serverCommand = new ArrayList<>(List.of("stdbuf", "-oL"));
        serverCommand.addAll(common);
        Process server = start(serverCommand, serverLog);
        try {
            waitFor(server, serverLog, "Waiting for client");
            List<String> clientCommand = new ArrayList<>(common);
            clientCommand.add("127.0.0.1");
            Process client = start(clientCommand, clientLog);
            if (!client.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                client.destroyForcibly();
                throw new IOException(String.join(" ", clientCommand) + " did not finish in " + TIMEOUT_SECONDS
                        + " s");
            }
            String[] values = resultLine(clientLog);
            if (client.exitValue() != 0 || values == null) {
                throw new IOException(String.join(" ", clientCommand) + " failed (exit " + client.exitValue()
                        + "):\n" + tail(clientLog) + "\nserver:\n" + tail(serverLog));
            }
            server.waitFor(10, TimeUnit.SECONDS);
            return values;
        } finally {
            server.destroyForcibly();
        }
    }

    private Process start(List<String> command, Path log) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        if (libraryDir != null) {
            pb.environment().put("LD_LIBRARY_PATH", libraryDir.toString());
        }
        return pb.start();
    }

    private static void waitFor(Process server, Path log, String text) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (Files.exists(log) && Files.readString(log).contains(text)) {
                Thread.sleep(100); // it prints before it listens
                return;
            }
            if (!server.isAlive()) {
                throw new IOException("perftest server exited (" + server.exitValue() + "):\n" + tail(log));
            }
            Thread.sleep(50);
        }
        throw new IOException("perftest server did not start in 30 s:\n" + tail(log));
    }

    /** The first line of numbers after the result header. */
    private static String[] resultLine(Path log) throws IOException {
        boolean header = false;
        for (String line : Files.readAllLines(log)) {
            String t = line.trim();
            if (t.startsWith("#bytes")) {
                header = true;
            } else if (header && !t.isEmpty() && Character.isDigit(t.charAt(0))) {
                return t.split("\\s+");
            }
        }
        return null;
    }

    private static String tail(Path log) throws IOException {
        if (!Files.exists(log)) {
            return "(no output)";
        }
        List<String> lines = Files.readAllLines(log);
        return String.join("\n", lines.subList(Math.max(0, lines.size() - 8), lines.size()));
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
