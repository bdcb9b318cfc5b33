package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.util.concurrent.DefaultThreadFactory;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
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

    private final ThreadFactory delegate;
    private final List<Thread> threads = new CopyOnWriteArrayList<>();
    private final List<Path> tasks = new CopyOnWriteArrayList<>();

    LoopThreads(String name) {
        delegate = new DefaultThreadFactory(name);
    }

    @Override
    public Thread newThread(Runnable r) {
        Thread t = delegate.newThread(() -> {
            // The loop's own /proc entry. Not found by name: threads the RDMA libraries start from a loop thread
            // inherit its name.
            try {
                tasks.add(Path.of("/proc").resolve(Files.readSymbolicLink(Path.of("/proc/thread-self"))));
            } catch (IOException | UnsupportedOperationException e) {
                // no /proc: sleeps() says -1
            }
            r.run();
        });
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
        long sum = 0;
        for (Path task : tasks) {
            try {
                for (String line : Files.readAllLines(task.resolve("status"))) {
                    if (line.startsWith("voluntary_ctxt_switches:")) {
                        sum += Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                    }
                }
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }
        return tasks.isEmpty() ? -1 : sum;
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
