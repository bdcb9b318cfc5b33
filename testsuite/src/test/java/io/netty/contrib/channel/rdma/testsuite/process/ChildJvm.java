package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
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
 * never blocks on a full pipe) into lines the test can wait for; its standard error goes to the test's.
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
        List<String> command = new ArrayList<>(prefix);
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-Dio.netty.contrib.rdma.libraryPath="
                + System.getProperty("io.netty.contrib.rdma.libraryPath", "bundled"));
        command.add("-D" + TestAddress.PROPERTY + "=" + TestAddress.host());
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(main.getName());
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
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
