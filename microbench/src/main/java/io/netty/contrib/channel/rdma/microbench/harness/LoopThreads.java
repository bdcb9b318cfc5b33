package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.util.concurrent.DefaultThreadFactory;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadFactory;

/**
 * The threads of one event loop group, remembered as they are created, so that the heap they allocate and the
 * CPU they use can be read from another thread.
 */
final class LoopThreads implements ThreadFactory {
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /** Linux keeps this many characters of a thread's name ({@code /proc/.../comm}). */
    private static final int COMM_LENGTH = 15;

    private final ThreadFactory delegate;
    private final List<Thread> threads = new CopyOnWriteArrayList<>();

    LoopThreads(String name) {
        delegate = new DefaultThreadFactory(name);
    }

    @Override
    public Thread newThread(Runnable r) {
        Thread t = delegate.newThread(r);
        threads.add(t);
        return t;
    }

    /** Bytes of heap the loop threads allocated so far. */
    long allocatedBytes() {
        long sum = 0;
        for (Thread t : threads) {
            sum += Math.max(0, THREADS.getThreadAllocatedBytes(t.threadId()));
        }
        return sum;
    }

    /** CPU nanoseconds the loop threads used so far. */
    long cpuNanos() {
        long sum = 0;
        for (Thread t : threads) {
            sum += Math.max(0, THREADS.getThreadCpuTime(t.threadId()));
        }
        return sum;
    }

    /**
     * How often the loop threads went to sleep so far (voluntary context switches, from {@code /proc}): each is a
     * blocking wait that a wakeup had to end. -1 where {@code /proc} cannot tell.
     */
    long sleeps() {
        Set<String> names = new HashSet<>();
        for (Thread t : threads) {
            String name = t.getName();
            names.add(name.length() > COMM_LENGTH ? name.substring(0, COMM_LENGTH) : name);
        }
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path task : tasks) {
                try {
                    if (!names.contains(Files.readString(task.resolve("comm")).trim())) {
                        continue;
                    }
                    for (String line : Files.readAllLines(task.resolve("status"))) {
                        if (line.startsWith("voluntary_ctxt_switches:")) {
                            sum += Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                        }
                    }
                } catch (NoSuchFileException gone) {
                    // a thread that just ended
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return sum;
    }

    /** CPU nanoseconds this whole process used so far (every thread: loops, the software device, GC, JIT). */
    static long processCpuNanos() {
        return OS.getProcessCpuTime();
    }

    /** One line with the counters, as the server's control port answers: see {@code BenchClient.Control}. */
    String statsLine() {
        return allocatedBytes() + " " + cpuNanos() + " " + processCpuNanos() + " " + System.nanoTime() + " "
                + sleeps();
    }
}
