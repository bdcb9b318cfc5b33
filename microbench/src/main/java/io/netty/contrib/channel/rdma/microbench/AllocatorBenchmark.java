package io.netty.contrib.channel.rdma.microbench;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrar;
import io.netty.util.concurrent.DefaultEventExecutor;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

/**
 * Allocate-and-release of one direct buffer: {@link RdmaByteBufAllocator} (over a registrar that registers
 * nothing, so no device is needed) against Netty's pooled and adaptive allocators, one thread and
 * {@value #CONTENDING} contending (more than the cores of a small machine, so threads are also preempted while
 * they hold the allocator's locks).
 * JMH's worker threads are not event-loop threads, so the plain benchmarks measure each allocator's shared path;
 * the {@code OnEventLoop} ones run batches on a Netty executor thread, where thread caches and object recycling
 * apply, as on the transport's data path. Run with {@code -prof gc} to see the garbage per operation.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class AllocatorBenchmark {

    /** Registers nothing: measures the allocator, not the device. */
    private static final MemoryRegistrar NO_DEVICE = chunk -> new MemoryRegistrar.Registration() {
        @Override
        public int lkey() {
            return 0;
        }

        @Override
        public void close() {
        }
    };

    @Param({ "64", "4096", "65536" })
    public int size;

    @Param({ "rdma", "pooled", "adaptive" })
    public String allocator;

    private ByteBufAllocator alloc;

    @Setup
    public void setUp() {
        alloc = switch (allocator) {
            case "rdma" -> new RdmaByteBufAllocator(NO_DEVICE);
            case "pooled" -> PooledByteBufAllocator.DEFAULT;
            case "adaptive" -> new AdaptiveByteBufAllocator();
            default -> throw new IllegalArgumentException("allocator: " + allocator);
        };
    }

    @TearDown
    public void tearDown() {
        if (alloc instanceof RdmaByteBufAllocator rdma) {
            rdma.close();
        }
    }

    private static final int BATCH = 1024;
    static final int CONTENDING = 4;

    /** A Netty executor thread (a FastThreadLocalThread) per JMH thread. */
    @State(Scope.Thread)
    public static class EventLoop {
        DefaultEventExecutor executor;

        @Setup
        public void setUp() {
            executor = new DefaultEventExecutor();
        }

        @TearDown
        public void tearDown() {
            executor.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    @Benchmark
    public int allocateAndRelease() {
        return cycle();
    }

    @Benchmark
    @Threads(CONTENDING)
    public int allocateAndReleaseContended() {
        return cycle();
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int allocateAndReleaseOnEventLoop(EventLoop loop) throws Exception {
        return loop.executor.submit(this::batch).get();
    }

    @Benchmark
    @Threads(CONTENDING)
    @OperationsPerInvocation(BATCH)
    public int allocateAndReleaseOnEventLoopContended(EventLoop loop) throws Exception {
        return loop.executor.submit(this::batch).get();
    }

    private int batch() {
        int sum = 0;
        for (int i = 0; i < BATCH; i++) {
            sum += cycle();
        }
        return sum;
    }

    private int cycle() {
        ByteBuf buf = alloc.directBuffer(size);
        buf.writeByte(1); // touch it, as any user would
        int capacity = buf.capacity();
        buf.release();
        return capacity;
    }
}
