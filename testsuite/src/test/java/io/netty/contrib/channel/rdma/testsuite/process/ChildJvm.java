package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A JVM running one of this package's programs on the test's class path and RDMA library selection, optionally
 * under a command prefix (such as {@code ip netns exec NAME}). Its standard output is read all the time (so it
 * never blocks on a full pipe) into lines the test can wait for; its standard error goes to the test's, or into
 * the same lines ({@link #startMergingErrors}).
 */
final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> seen = new ArrayList<>();
    private final Thread reader;

    private ChildJvm(Process process, String name) {
        this.process = process;
        reader = new Thread(() -> new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)).lines().forEach(lines::add), name + "-output");
        reader.setDaemon(true);
        reader.start();
    }

    static ChildJvm start(List<String> prefix, Class<?> main, String... args) throws IOException {
        return start(prefix, List.of(), main, args);
    }

    /** The same with JVM options ({@code -Xmx...}) of its own. */
    static ChildJvm start(List<String> prefix, List<String> jvmArgs, Class<?> main, String... args)
            throws IOException {
        return start(prefix, jvmArgs, false, main, args);
    }

    /** The same with its standard error read into the lines too (for tests that check what the child logs). */
    static ChildJvm startMergingErrors(List<String> jvmArgs, Class<?> main, String... args) throws IOException {
        return start(List.of(), jvmArgs, true, main, args);
    }

    private static ChildJvm start(List<String> prefix, List<String> jvmArgs, boolean mergeErrors, Class<?> main,
                                  String... args) throws IOException {
        List<String> command = new ArrayList<>(prefix);
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmArgs);
        command.add("--enable-native-access=ALL-UNNAMED");
        // the parent's VM tuning (the rxe guest runs C1-only with the serial collector: under emulation a JVM
        // with C2 and G1 starts many times slower)
        for (String arg : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (arg.startsWith("-XX:")) {
                command.add(arg);
            }
        }
        command.add("-Dio.netty.contrib.rdma.libraryPath="
                + System.getProperty("io.netty.contrib.rdma.libraryPath", "bundled"));
        command.add("-D" + TestAddress.PROPERTY + "=" + TestAddress.host());
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(main.getName());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command);
        if (mergeErrors) {
            builder.redirectErrorStream(true);
        } else {
            builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        }
        Process process = builder.start();
        return new ChildJvm(process, main.getSimpleName());
    }

    /** The first output line starting with {@code prefix}, or null if none came within {@code seconds}. */
    String awaitLine(String prefix, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        for (;;) {
            String line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (line == null) {
                return null;
            }
            seen.add(line);
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** Writes one line to the child's standard input. */
    void send(String line) throws IOException {
        process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().flush();
    }

    /** Closes the child's standard input: the servers here take it as the signal to shut down. */
    void closeInput() throws IOException {
        process.getOutputStream().close();
    }

    /** Waits for the child to exit; its exit code, or null if it is still running after {@code seconds}. */
    Integer awaitExit(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            return null;
        }
        reader.join(10_000);
        return process.exitValue();
    }

    /**
     * For a failed wait: whether the child still runs, what it printed, and, if it runs, its threads
     * ({@code jcmd PID Thread.print}), so that a child that hangs says where.
     */
    String diagnose() {
        StringBuilder sb = new StringBuilder("child pid ").append(process.pid())
                .append(process.isAlive() ? " still running" : " exited with " + process.exitValue())
                .append("; its output: ").append(output());
        if (process.isAlive()) {
            try {
                Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                        String.valueOf(process.pid()), "Thread.print").redirectErrorStream(true).start();
                String dump = new String(jcmd.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                jcmd.waitFor(60, TimeUnit.SECONDS);
                sb.append("\nits threads:\n").append(dump);
            } catch (IOException | InterruptedException e) {
                sb.append("; no thread dump: ").append(e);
            }
        }
        return sb.toString();
    }

    /** Every output line so far, for assertion messages. */
    List<String> output() {
        List<String> all = new ArrayList<>(seen);
        lines.drainTo(all);
        seen.clear();
        seen.addAll(all);
        return all;
    }

    @Override
    public void close() {
        process.destroyForcibly();
    }
}
