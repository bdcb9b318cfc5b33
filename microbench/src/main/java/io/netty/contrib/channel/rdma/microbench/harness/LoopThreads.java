package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.util.concurrent.DefaultThreadFactory;

import java.lang.management.ManagementFactory;
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

    /** CPU nanoseconds this whole process used so far (every thread: loops, the software device, GC, JIT). */
    static long processCpuNanos() {
        return OS.getProcessCpuTime();
    }

    /** One line with the three counters, as the server's control port answers. */
    String statsLine() {
        return allocatedBytes() + " " + cpuNanos() + " " + processCpuNanos() + " " + System.nanoTime();
    }
}
