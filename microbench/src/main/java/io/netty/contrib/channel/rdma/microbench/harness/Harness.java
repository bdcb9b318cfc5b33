package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The end-to-end benchmark: for each transport a server JVM ({@link BenchServer}) and a client JVM
 * ({@link BenchClient}) on 127.0.0.1, and perftest for raw verbs on the same software RDMA device; then a
 * Markdown table, {@code results.json} and a PNG chart in {@code --out}, and the page {@code --page}.
 *
 * <pre>
 * ./microbench/run.sh [--quick] [--transports rdma,rdma-busy-poll,verbs,epoll,nio] [--out docs/benchmarks]
 *                     [--page docs/benchmarks.md|none] [--rdma-library bundled|system|DIR] [--jvm-arg ARG]...
 *                     [--sizes 64,4096,65536,1048576] [--connections 1,8] [--latency-seconds 5] ...
 * </pre>
 */
public final class Harness {
    static final String ALL_TRANSPORTS = "rdma,rdma-busy-poll,verbs,epoll,nio";

    private final Settings settings;
    private final boolean quick;
    private final List<String> transports;
    private final Path out;
    private final Path page;
    private final String rdmaLibrary;
    private final List<String> jvmArgs;
    /** Processes that spin on the CPU beside every row: a machine with more runnable threads than cores. */
    private final int cpuHogs;
    /** {@code --sequential}: each transport runs all its rows before the next starts (one JVM pair each). */
    private final boolean sequential;
    /** {@code --repeat}: how many times every row runs (each repeat all of them, in alternating order). */
    private final int repeat;
    /** Each repeat's measurements; {@link #results} is the current repeat's. */
    private final List<List<Result>> repeats = new ArrayList<>();
    private List<Result> results;
    private final List<String> failures = new ArrayList<>();
    /** The 1-minute load average as each transport started: how quiet the machine was for its rows. */
    private final List<String> loads = new ArrayList<>();

    private Harness(String[] args) {
        List<String> rest = new ArrayList<>();
        settings = Settings.parse(args, rest);
        quick = Arrays.asList(args).contains("--quick");
        sequential = Arrays.asList(args).contains("--sequential");
        String transportList = ALL_TRANSPORTS;
        Path outDir = Path.of("docs", "benchmarks");
        String pageName = "docs/benchmarks.md";
        String library = System.getProperty(NativeLibraries.LIBRARY_PATH_PROPERTY,
                System.getenv().getOrDefault(NativeLibraries.LIBRARY_PATH_ENV, NativeLibraries.BUNDLED));
        List<String> extraJvmArgs = new ArrayList<>();
        int hogs = 0;
        int repeatCount = 1;
        String[] a = rest.toArray(String[]::new);
        for (int i = 0; i < a.length; i++) {
            switch (a[i]) {
                case "--transports" -> transportList = Settings.value(a, ++i, a[i - 1]);
                case "--out" -> outDir = Path.of(Settings.value(a, ++i, a[i - 1]));
                case "--page" -> pageName = Settings.value(a, ++i, a[i - 1]);
                case "--rdma-library" -> library = Settings.value(a, ++i, a[i - 1]);
                case "--jvm-arg" -> extraJvmArgs.add(Settings.value(a, ++i, a[i - 1]));
                case "--cpu-hogs" -> hogs = Integer.parseInt(Settings.value(a, ++i, a[i - 1]));
                case "--repeat" -> repeatCount = Integer.parseInt(Settings.value(a, ++i, a[i - 1]));
                case "--sequential" -> { }
                case "--help", "-h" -> {
                    System.out.println("options: --quick --transports " + ALL_TRANSPORTS + " --out DIR"
                            + " --page FILE|none --rdma-library bundled|system|DIR --jvm-arg ARG --cpu-hogs N --sequential --repeat N"
                            + " --sizes CSV"
                            + " --connections CSV --fresh-sizes CSV --latency-warmup S --latency-seconds S --latency-max-count N"
                            + " --throughput-warmup S --throughput-seconds S --idle-seconds S --threads N");
                    System.exit(0);
                }
                default -> throw new IllegalArgumentException("unknown option " + a[i] + " (--help lists them)");
            }
        }
        transports = List.of(transportList.split(","));
        for (String t : transports) {
            if (!t.equals("verbs")) {
                Transport.of(t);
            }
        }
        out = outDir;
        page = pageName.equals("none") ? null : Path.of(pageName);
        rdmaLibrary = library;
        jvmArgs = List.copyOf(extraJvmArgs);
        if (hogs < 0) {
            throw new IllegalArgumentException("--cpu-hogs takes a count >= 0");
        }
        cpuHogs = hogs;
        if (repeatCount < 1) {
            throw new IllegalArgumentException("--repeat takes a count >= 1");
        }
        repeat = repeatCount;
    }

    public static void main(String[] args) throws Exception {
        System.exit(run(args));
    }

    /** Runs everything {@code args} ask for and writes the outputs; returns 0 if every transport ran. */
    static int run(String[] args) throws IOException, InterruptedException {
        return new Harness(args).run();
    }

    private int run() throws IOException, InterruptedException {
        Machine machine = Machine.describe();
        System.err.printf("benchmark on %d cores (%s), load average %s%n", machine.cores(), machine.cpu(),
                machine.loadBefore());
        List<Process> hogs = startCpuHogs();
        try {
            runTransports();
        } finally {
            for (Process hog : hogs) {
                hog.destroyForcibly();
            }
        }
        machine = machine.finished();
        write(machine);
        for (String f : failures) {
            System.err.println("FAILED " + f);
        }
        return failures.isEmpty() ? 0 : 1;
    }

    /** {@code --cpu-hogs}: shell loops that never block, started before the first row and stopped after the last. */
    private List<Process> startCpuHogs() throws IOException {
        List<Process> hogs = new ArrayList<>();
        for (int i = 0; i < cpuHogs; i++) {
            hogs.add(new ProcessBuilder("sh", "-c", "while :; do :; done").start());
        }
        if (cpuHogs > 0) {
            // Also when the harness is interrupted: a hog left behind would load every later run.
            Runtime.getRuntime().addShutdownHook(new Thread(() -> hogs.forEach(Process::destroyForcibly)));
            System.err.println(cpuHogs + " CPU-bound processes run beside every row (--cpu-hogs)");
            loads.add(cpuHogs + " CPU-bound processes beside every row");
        }
        return hogs;
    }

    /**
     * Runs every transport on one message size (a JVM pair each, or perftest) before the next size, so that the
     * rows compared in a ratio ran side by side; {@code --sequential} runs each transport's rows all at once. Every
     * other size runs the transports in reverse order: this VM's speed drifts within minutes (the same build run
     * twice back to back came out up to a fifth apart, the second faster three times in three), and a fixed order
     * would hand such a drift to the same transport in every ratio. With {@code --repeat N} all of it runs N
     * times, the order of each repeat the reverse of the one before; the page shows medians, and each ratio is
     * the median of the ratios within a repeat.
     */
    private void runTransports() {
        List<Settings> slices = sequential ? List.of(settings) : settings.slices();
        for (int rep = 0; rep < repeat; rep++) {
            results = new ArrayList<>();
            repeats.add(results);
            if (repeat > 1) {
                System.err.println("==== repeat " + (rep + 1) + " of " + repeat);
            }
            runSlices(slices, rep);
        }
    }

    private void runSlices(List<Settings> slices, int rep) {
        for (int k = 0; k < slices.size(); k++) {
            Settings slice = slices.get(k);
            List<String> order = (k + rep) % 2 == 0 ? transports : transports.reversed();
            for (String t : order) {
                if (k == 0 && rep == 0) {
                    double load = Machine.loadAverage1();
                    System.err.println("== " + t + " (load average " + load + ")");
                    loads.add(t + " " + load);
                    results.add(t.equals("verbs")
                            ? new Result("verbs", "perftest", 0, 0, "load_average_1min", load, "threads")
                            : new Result(Transport.of(t).transport, Transport.of(t).mode, 0, 0, "load_average_1min",
                                    load, "threads"));
                } else {
                    System.err.println("== " + t + " " + describe(slice));
                }
                try {
                    if (t.equals("verbs")) {
                        verbs(slice);
                    } else if (slice.sizes.length > 0 || slice.freshSizes.length > 0 || slice.idleSeconds > 0) {
                        pair(Transport.of(t), slice);
                    }
                } catch (Exception e) {
                    failures.add(t + " " + describe(slice) + ": " + e.getMessage());
                    System.err.println(t + " failed: " + e);
                }
            }
        }
    }

    private static String describe(Settings slice) {
        return "sizes " + Arrays.toString(slice.sizes) + ", fresh sizes " + Arrays.toString(slice.freshSizes);
    }

    // ---------------------------------------------------------------- Netty transports: two JVMs

    private void pair(Transport transport, Settings settings) throws IOException, InterruptedException {
        List<String> server = java(transport, BenchServer.class);
        server.addAll(List.of("--transport", transport.key(), "--threads", Integer.toString(settings.threads)));
        Process serverProcess = new ProcessBuilder(server).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try {
            BufferedReader serverOut = reader(serverProcess.getInputStream());
            String ready;
            while ((ready = readLine(serverOut, serverProcess, 60)) != null && !ready.startsWith("ready ")) {
                System.err.println(ready); // the JVM's own output, e.g. -Xlog or JFR
            }
            if (ready == null) {
                throw new IOException("server did not start within 60 s");
            }
            String[] ports = ready.split(" ");
            List<String> client = java(transport, BenchClient.class);
            client.addAll(List.of("--transport", transport.key(), "--ports", ports[1] + "," + ports[2] + ","
                    + ports[3]));
            client.addAll(settings.toArgs());
            Process clientProcess = new ProcessBuilder(client).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            try {
                BufferedReader clientOut = reader(clientProcess.getInputStream());
                String line;
                while ((line = clientOut.readLine()) != null) {
                    if (line.startsWith("result\t")) {
                        results.add(Result.parseLine(line));
                    } else {
                        System.err.println(line);
                    }
                }
                if (!clientProcess.waitFor(clientTimeoutSeconds(settings), TimeUnit.SECONDS)) {
                    throw new IOException("client did not finish in " + clientTimeoutSeconds(settings) + " s");
                }
                if (clientProcess.exitValue() != 0) {
                    throw new IOException("client exited with " + clientProcess.exitValue());
                }
            } finally {
                clientProcess.destroyForcibly();
            }
        } finally {
            // The server runs until its standard input closes.
            OutputStream stdin = serverProcess.getOutputStream();
            stdin.close();
            if (!serverProcess.waitFor(30, TimeUnit.SECONDS)) {
                serverProcess.destroyForcibly();
                System.err.println("server did not stop in 30 s: killed");
            }
        }
    }

    private List<String> java(Transport transport, Class<?> main) {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString(), "--enable-native-access=ALL-UNNAMED", "-Xms512m", "-Xmx512m"));
        if (transport.rdma() && !rdmaLibrary.equals("system")) {
            command.add("-D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + rdmaLibrary);
        }
        command.addAll(jvmArgs);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        return command;
    }

    private static long clientTimeoutSeconds(Settings settings) {
        double perSize = settings.latencyWarmup + settings.latency
                + settings.connections.length * (3 * settings.throughputWarmup + 2 * settings.throughput);
        double perFreshSize = settings.connections.length * (3 * settings.throughputWarmup + 2 * settings.throughput);
        return 120 + (long) (4 * (settings.sizes.length * perSize + settings.freshSizes.length * perFreshSize
                + settings.idleSeconds));
    }

    private static BufferedReader reader(InputStream in) {
        return new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
    }

    /** A line from {@code in}, or null when the process ends first or nothing comes within the timeout. */
    private static String readLine(BufferedReader in, Process p, int timeoutSeconds) throws IOException,
            InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (System.nanoTime() < deadline) {
            if (in.ready()) {
                return in.readLine();
            }
            if (!p.isAlive()) {
                return in.ready() ? in.readLine() : null;
            }
            Thread.sleep(20);
        }
        return null;
    }

    // ---------------------------------------------------------------- raw verbs: perftest

    private void verbs(Settings settings) throws IOException, InterruptedException {
        if (settings.sizes.length == 0) {
            return;
        }
        if (!Perftest.available()) {
            throw new IOException("perftest is not installed (Debian: apt-get install perftest;"
                    + " scripts/prereqs.sh installs it)");
        }
        Path work = Files.createTempDirectory("bench-perftest-");
        try {
            Path libraries = switch (rdmaLibrary) {
                case NativeLibraries.BUNDLED -> extractBundled(work);
                case "system" -> null;
                default -> Path.of(rdmaLibrary).toAbsolutePath();
            };
            Perftest perftest = new Perftest(libraries, work, quick);
            int seconds = (int) Math.max(1, Math.round(settings.throughput));
            for (int size : settings.sizes) {
                System.err.printf(Locale.ROOT, "verbs: ib_send_lat %d B%n", size);
                results.addAll(perftest.latency(size, false));
                System.err.printf(Locale.ROOT, "verbs: ib_send_lat -e %d B%n", size);
                results.addAll(perftest.latency(size, true));
            }
            for (int connections : settings.connections) {
                for (int size : settings.sizes) {
                    for (String program : List.of("ib_send_bw", "ib_write_bw")) {
                        System.err.printf(Locale.ROOT, "verbs: %s %d B over %d QP(s)%n", program, size,
                                connections);
                        results.addAll(perftest.bandwidth(program, size, connections, seconds));
                    }
                }
            }
        } finally {
            try (Stream<Path> files = Files.walk(work)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** The software device the Java side loads with {@code bundled}, for perftest's LD_LIBRARY_PATH. */
    private static Path extractBundled(Path work) throws IOException {
        Path dir = Files.createDirectories(work.resolve("lib"));
        for (String name : List.of("libibverbs.so.1", "librdmacm.so.1")) {
            try (InputStream in = Harness.class.getClassLoader().getResourceAsStream(
                    NativeLibraries.BUNDLED_RESOURCE_DIR + name)) {
                if (in == null) {
                    throw new IOException("the bundled software RDMA device is missing from the class path: " + name);
                }
                Files.copy(in, dir.resolve(name), StandardCopyOption.REPLACE_EXISTING);
            }
        }
        return dir;
    }

    // ---------------------------------------------------------------- outputs

    private void write(Machine machine) throws IOException {
        Results r = Results.ofRepeats(repeats);
        String tables = (repeat > 1 ? "Every row ran " + repeat + " times, in alternating order: values are the medians"
                + " of the repeats, ratios the medians of the ratios within each repeat (each repeat's in parentheses"
                + " under Goals).\n\n" : "") + Report.tables(r);
        Files.createDirectories(out);
        Files.writeString(out.resolve("results.json"), Result.toJson(repeats));
        Files.writeString(out.resolve("results.md"), "## Results\n\n" + machineText(machine, loads) + "\n" + tables);
        Path chart = out.resolve("benchmarks.png");
        Chart.write(r, String.format(Locale.ROOT, "%d cores, %s, %s, %s, %s%s", machine.cores(), machine.cpu(),
                machine.kernel(), machine.jdk(), machine.date(), quick ? ", --quick" : ""), chart);
        if (page != null) {
            Files.writeString(page, Page.text(machineText(machine, loads), quick, failures, chartLink(chart), tables));
        }
        System.out.println(tables);
        System.err.println("wrote " + out.resolve("results.json") + ", " + out.resolve("results.md") + ", " + chart
                + (page == null ? "" : ", " + page));
    }

    private String chartLink(Path chart) {
        Path base = page.toAbsolutePath().getParent();
        return base.relativize(chart.toAbsolutePath()).toString();
    }

    static String machineText(Machine m, List<String> loads) {
        return String.format(Locale.ROOT, """
                | machine | |
                | --- | --- |
                | cores | %d |
                | CPU | %s |
                | kernel | %s |
                | JDK | %s |
                | Netty | %s |
                | date | %s |
                | load average before / after (1, 5, 15 min) | %s / %s |
                | 1-min load average as each transport started | %s |
                """, m.cores(), m.cpu(), m.kernel(), m.jdk(), m.netty(), m.date(), m.loadBefore(), m.loadAfter(),
                String.join(", ", loads));
    }
}
