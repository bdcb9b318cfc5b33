package io.netty.contrib.channel.rdma;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocatorMetric;
import io.netty.buffer.ByteBufAllocatorMetricProvider;
import io.netty.buffer.UnpooledHeapByteBuf;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrar;
import io.netty.contrib.channel.rdma.internal.memory.PageMode;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredMemoryPool;
import io.netty.util.internal.StringUtil;

import static io.netty.util.internal.ObjectUtil.checkNotNull;
import static io.netty.util.internal.ObjectUtil.checkPositive;
import static io.netty.util.internal.ObjectUtil.checkPositiveOrZero;

/**
 * The RDMA channels' default {@link io.netty.buffer.ByteBufAllocator}: pooled direct buffers in memory registered
 * with the RDMA device, so that reads and writes through {@code ctx.alloc()} reach the wire without a copy.
 *
 * <p>Memory comes in large chunks (4 MiB by default), on 2 MiB huge pages where the system has them
 * ({@link RdmaIoHandlerConfig.HugePages}: explicit hugetlb pages, else transparent huge pages, else 4 KiB pages),
 * touched, then registered once for local access only; buffers are carved
 * out of them in power-of-two size classes. Event-loop threads keep a small cache per size class; other threads
 * share the pool under a lock. A buffer larger than {@code maxPooledCapacity} gets its own registered chunk,
 * freed on release, so very large buffers are costly: prefer several smaller ones.
 *
 * <p>Buffers behave like any pooled Netty buffer: reference counted, leak-detected, releasable on any thread,
 * growing within registered memory. {@link #heapBuffer()} returns ordinary unpooled heap buffers, which the
 * transport copies once into registered memory when they are written.
 *
 * <p>The transport creates one allocator per protection domain and {@linkplain #close() closes} it when its event
 * loop group terminates: every chunk is deregistered and freed, and any further allocation fails with
 * {@link IllegalStateException}. Registration failures (typically {@code RLIMIT_MEMLOCK}) are reported by an
 * exception that names the limit and how to raise it.
 */
public final class RdmaByteBufAllocator extends AbstractByteBufAllocator
        implements ByteBufAllocatorMetricProvider, AutoCloseable {

    /** Default size of the chunks registered with the device. */
    public static final int DEFAULT_CHUNK_SIZE = 4 << 20;
    /** Default largest buffer served from chunks; larger buffers get a dedicated registration. */
    public static final int DEFAULT_MAX_POOLED_CAPACITY = 1 << 20;
    /** Default number of empty chunks kept registered for reuse. */
    public static final int DEFAULT_MAX_EMPTY_CHUNKS = 2;

    private static final int MIN_CHUNK_SIZE = 64 << 10;
    private static final int MAX_CHUNK_SIZE = 1 << 30;
    private static final int MIN_POOLED_CAPACITY = 64;

    private final RegisteredMemoryPool pool;
    private final Metric metric = new Metric();

    /** An allocator with the default chunk size, pooled maximum and retention. */
    public RdmaByteBufAllocator(MemoryRegistrar registrar) {
        this(registrar, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_POOLED_CAPACITY, DEFAULT_MAX_EMPTY_CHUNKS);
    }

    /**
     * @param registrar         registers chunks with the device (the transport provides it)
     * @param chunkSize         bytes registered at a time: a power of two from 64 KiB to 1 GiB
     * @param maxPooledCapacity largest buffer carved from chunks: a power of two from 64 B to {@code chunkSize}
     * @param maxEmptyChunks    empty chunks kept registered for reuse before they are deregistered and freed
     */
    public RdmaByteBufAllocator(MemoryRegistrar registrar, int chunkSize, int maxPooledCapacity, int maxEmptyChunks) {
        this(registrar, chunkSize, maxPooledCapacity, maxEmptyChunks, RdmaIoHandlerConfig.HugePages.AUTO);
    }

    /**
     * @param hugePages the pages behind the chunks; {@link RdmaIoHandlerConfig.HugePages#EXPLICIT} needs a
     *                  {@code chunkSize} of at least 2 MiB
     * @see #RdmaByteBufAllocator(MemoryRegistrar, int, int, int)
     */
    public RdmaByteBufAllocator(MemoryRegistrar registrar, int chunkSize, int maxPooledCapacity, int maxEmptyChunks,
                                RdmaIoHandlerConfig.HugePages hugePages) {
        super(true);
        checkNotNull(registrar, "registrar");
        checkPowerOfTwo(chunkSize, "chunkSize", MIN_CHUNK_SIZE, MAX_CHUNK_SIZE);
        checkPowerOfTwo(maxPooledCapacity, "maxPooledCapacity", MIN_POOLED_CAPACITY, chunkSize);
        checkPositiveOrZero(maxEmptyChunks, "maxEmptyChunks");
        checkNotNull(hugePages, "hugePages");
        pool = new RegisteredMemoryPool(registrar, chunkSize, maxPooledCapacity, maxEmptyChunks,
                PageMode.valueOf(hugePages.name()));
    }

    /**
     * The allocator the RDMA channels use by default: the one of the first RDMA device. Hand it to frameworks that
     * set an allocator of their own on every channel (gRPC: {@code withChildOption(ChannelOption.ALLOCATOR, ...)}),
     * or their writes are copied once into registered memory. It is closed when the last RDMA event loop stops.
     */
    public static RdmaByteBufAllocator defaultAllocator() {
        return RdmaDevices.defaultAllocator();
    }

    private static void checkPowerOfTwo(int value, String name, int min, int max) {
        checkPositive(value, name);
        if (Integer.bitCount(value) != 1 || value < min || value > max) {
            throw new IllegalArgumentException(name + ": " + value + " (expected: a power of two in [" + min + ", "
                    + max + "])");
        }
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return toLeakAwareBuffer(pool.allocate(this, initialCapacity, maxCapacity));
    }

    /** Heap buffers are not pooled: the device cannot use them, and the JVM's heap is cheap for them. */
    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        ensureOpen();
        return new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    /**
     * Returns what the calling thread caches to the shared pool, e.g. before an event loop goes idle. The RDMA
     * event loops do it themselves once their connections have been quiet for
     * {@link RdmaIoHandlerConfig#memoryReleaseDelayMillis()}.
     */
    public void trimCurrentThreadCache() {
        pool.trimCurrentThreadCache();
    }

    @Override
    public Metric metric() {
        return metric;
    }

    /** {@code buf} under this allocator's leak detection. */
    ByteBuf leakAware(ByteBuf buf) {
        return toLeakAwareBuffer(buf);
    }

    /** The pool behind this allocator, for the transport (lkeys, protection-domain checks). */
    RegisteredMemoryPool pool() {
        return pool;
    }

    private void ensureOpen() {
        if (pool.isClosed()) {
            throw new IllegalStateException("RdmaByteBufAllocator is closed");
        }
    }

    /**
     * Deregisters and frees all memory. Buffers still alive fail on access (with an exception, never a crash);
     * releasing them is harmless. Idempotent.
     */
    @Override
    public void close() {
        pool.close();
    }

    /**
     * Its device was removed: every chunk is deregistered now and its memory kept, so buffers still held stay
     * usable; from now on the allocator hands out memory no device knows. Idempotent.
     */
    void deviceRemoved() {
        pool.deregister();
    }

    @Override
    public String toString() {
        return StringUtil.simpleClassName(this) + "(chunkSize: " + pool.chunkSize()
                + ", maxPooledCapacity: " + pool.maxPooledCapacity() + ", " + metric + ')';
    }

    /** Memory in use and registered by an {@link RdmaByteBufAllocator}. */
    public final class Metric implements ByteBufAllocatorMetric {

        private Metric() {
        }

        /** Heap buffers are not tracked: always -1. */
        @Override
        public long usedHeapMemory() {
            return -1;
        }

        /** Bytes held by live direct buffers (whole size-class slots). */
        @Override
        public long usedDirectMemory() {
            return pool.usedMemory();
        }

        /** Bytes registered with the device, including free and cached memory. */
        public long registeredMemory() {
            return pool.registeredMemory();
        }

        /** Registered chunks, pooled and dedicated. */
        public int chunkCount() {
            return pool.chunkCount();
        }

        /**
         * Chunks deregistered and freed so far: dedicated ones when their buffer is released, pooled ones when
         * they are empty and more than {@code maxEmptyChunks} are.
         */
        public long releasedChunks() {
            return pool.releasedChunks();
        }

        /** Of {@link #registeredMemory()}: the bytes on 2 MiB huge pages (explicit or transparent). */
        public long hugePageMemory() {
            return pool.hugePageMemory();
        }

        /**
         * The size of the pages behind the chunk registered last, as obtained (2097152 on huge pages, 4096 on
         * ordinary ones, whatever {@link RdmaIoHandlerConfig.HugePages} asked for); 0 before the first chunk.
         */
        public long pageSize() {
            return pool.pageSize();
        }

        /** The pages this allocator asks for. */
        public RdmaIoHandlerConfig.HugePages hugePages() {
            return RdmaIoHandlerConfig.HugePages.valueOf(pool.pageMode().name());
        }

        /** Empty chunks kept registered for reuse. */
        public int maxEmptyChunks() {
            return pool.maxEmptyChunks();
        }

        @Override
        public String toString() {
            return "usedDirectMemory: " + usedDirectMemory() + ", registeredMemory: " + registeredMemory()
                    + ", hugePageMemory: " + hugePageMemory() + ", pageSize: " + pageSize() + ", chunks: "
                    + chunkCount() + ", releasedChunks: " + releasedChunks();
        }
    }
}
