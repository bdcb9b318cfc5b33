package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBufAllocator;
import io.netty.util.concurrent.FastThreadLocal;
import io.netty.util.concurrent.FastThreadLocalThread;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static io.netty.util.internal.ObjectUtil.checkNotNull;

/**
 * Registered memory carved into power-of-two size classes, from {@value #MIN_SIZE} B up to the maximum pooled
 * capacity. Classes below {@value #PAGE_SIZE} B are slots of {@link Slab}s, larger ones aligned runs of pages.
 * Event-loop threads keep a bounded {@link ThreadCache} per class; the shared structures behind it take this
 * pool's lock. A capacity above the pooled maximum gets a dedicated chunk, registered on allocation and freed on
 * release.
 *
 * <p>Chunks are registered only when created. Empty pooled chunks beyond {@code maxEmptyChunks} are deregistered
 * and freed.
 */
public final class RegisteredMemoryPool {
    private static final int MIN_SHIFT = 6;
    static final int MIN_SIZE = 1 << MIN_SHIFT;
    static final int PAGE_SIZE = 64 * 1024;
    /** The bytes one thread may cache per size class, and the most slots it caches per class. */
    private static final int CACHE_BYTES_PER_CLASS = 128 * 1024;
    private static final int CACHE_MAX_ENTRIES = 256;

    private volatile MemoryRegistrar registrar;
    private final PageMode pageMode;
    private final int chunkSize;
    private final int maxPooledCapacity;
    private final int maxEmptyChunks;
    private final int[] cacheCapacities;
    private final FastThreadLocal<ThreadCache> threadCaches;
    private final ThreadCache noCache;

    // Guarded by this.
    private final Slab[] partialSlabs;
    private final List<Chunk> pooledChunks = new ArrayList<>();
    private final List<Chunk> dedicatedChunks = new ArrayList<>();
    private int emptyChunks;
    /** Second results of {@link #take(int)} and {@link #takePages(int)}, which return the chunk. */
    private int takenOffset;
    private int takenPage;
    /** Bytes of slots taken out (by buffers, or by thread caches to hand out) and of dedicated chunks. */
    private long takenBytes;

    private volatile boolean closed;
    /** The device went away ({@link #deregister()}). */
    private volatile boolean deregistered;
    private volatile long registeredBytes;
    /** Of {@link #registeredBytes}: the bytes on 2 MiB pages. */
    private volatile long hugePageBytes;
    /** The page size of the chunk created last; 0 before the first. */
    private volatile long lastPageSize;
    private volatile int chunkCount;
    /** Chunks deregistered and freed while the pool was open (written under the lock). */
    private volatile long releasedChunks;
    /**
     * Every thread cache alive: what they hold is taken from the pool but not in use, so {@link #usedMemory()}
     * subtracts it. Counting in the caches themselves keeps the allocation path free of shared counters (a
     * LongAdder updated per allocation and release was 8 % of a fresh-buffer stream's sender).
     */
    private final Set<ThreadCache> caches = ConcurrentHashMap.newKeySet();

    /**
     * @param chunkSize         power of two, at least {@value #PAGE_SIZE}
     * @param maxPooledCapacity power of two, {@value #MIN_SIZE} .. {@code chunkSize}
     * @param maxEmptyChunks    empty pooled chunks kept registered for reuse
     */
    public RegisteredMemoryPool(MemoryRegistrar registrar, int chunkSize, int maxPooledCapacity, int maxEmptyChunks) {
        this(registrar, chunkSize, maxPooledCapacity, maxEmptyChunks, PageMode.AUTO);
    }

    /**
     * @param pageMode the pages behind the chunks; {@link PageMode#EXPLICIT} needs a {@code chunkSize} of at least
     *                 2 MiB
     */
    public RegisteredMemoryPool(MemoryRegistrar registrar, int chunkSize, int maxPooledCapacity, int maxEmptyChunks,
                                PageMode pageMode) {
        this.registrar = checkNotNull(registrar, "registrar");
        this.pageMode = checkNotNull(pageMode, "pageMode");
        if (pageMode == PageMode.EXPLICIT && chunkSize % Chunk.HUGE_PAGE_SIZE != 0) {
            throw new IllegalArgumentException("chunkSize: " + chunkSize + " (expected: a multiple of 2 MiB for"
                    + " explicit huge pages)");
        }
        this.chunkSize = chunkSize;
        this.maxPooledCapacity = maxPooledCapacity;
        this.maxEmptyChunks = maxEmptyChunks;
        int classes = sizeClass(maxPooledCapacity) + 1;
        partialSlabs = new Slab[classes];
        cacheCapacities = new int[classes];
        for (int c = 0; c < classes; c++) {
            cacheCapacities[c] = Math.min(CACHE_MAX_ENTRIES, CACHE_BYTES_PER_CLASS / classSize(c));
        }
        noCache = new ThreadCache(this, new int[classes]);
        threadCaches = new FastThreadLocal<>() {
            @Override
            protected ThreadCache initialValue() {
                // Only threads that run FastThreadLocal.removeAll() on exit (Netty's event loops) get a cache:
                // anything cached by another thread would be lost with it. Netty's pooled allocator does the same.
                if (!FastThreadLocalThread.currentThreadWillCleanupFastThreadLocals()) {
                    return noCache;
                }
                ThreadCache cache = new ThreadCache(RegisteredMemoryPool.this, cacheCapacities);
                caches.add(cache);
                return cache;
            }

            @Override
            protected void onRemoval(ThreadCache cache) {
                cache.flush();
                caches.remove(cache);
            }
        };
    }

    static int sizeClass(int capacity) {
        return capacity <= MIN_SIZE ? 0 : 32 - Integer.numberOfLeadingZeros(capacity - 1) - MIN_SHIFT;
    }

    static int classSize(int sizeClass) {
        return MIN_SIZE << sizeClass;
    }

    /** A new buffer of {@code initialCapacity}, reference count 1, not yet leak-tracked. */
    public RegisteredByteBuf allocate(ByteBufAllocator alloc, int initialCapacity, int maxCapacity) {
        RegisteredByteBuf buf = RegisteredByteBuf.newInstance(alloc, this, maxCapacity);
        allocate(buf, initialCapacity);
        return buf;
    }

    /** Points {@code buf} at new memory of at least {@code capacity} bytes; its old memory is the caller's. */
    void allocate(RegisteredByteBuf buf, int capacity) {
        ensureOpen();
        if (capacity > maxPooledCapacity) {
            Chunk chunk = allocateDedicated(capacity);
            buf.setMemory(chunk, 0, (int) Math.min(chunk.size, Integer.MAX_VALUE), capacity);
        } else {
            int sizeClass = sizeClass(capacity);
            if (!threadCaches.get().allocate(sizeClass, buf, capacity)) {
                synchronized (this) {
                    ensureOpen();
                    Chunk chunk = take(sizeClass);
                    buf.setMemory(chunk, takenOffset, classSize(sizeClass), capacity);
                }
            }
        }
    }

    /** Gives back memory that {@link #allocate(RegisteredByteBuf, int)} handed out. */
    void free(Chunk chunk, int offset, int slotLength) {
        if (closed) {
            return; // close() freed the chunk
        }
        if (chunk.isDedicated()) {
            synchronized (this) {
                if (!closed && dedicatedChunks.remove(chunk)) {
                    takenBytes -= slotLength;
                    destroy(chunk);
                }
            }
            return;
        }
        int sizeClass = sizeClass(slotLength);
        if (!threadCaches.get().free(sizeClass, chunk, offset)) {
            synchronized (this) {
                giveBack(sizeClass, chunk, offset);
            }
        }
    }

    /** Fills a thread cache with up to {@code count} slots of {@code sizeClass}; returns how many. */
    synchronized int takeBatch(int sizeClass, Chunk[] chunks, int[] offsets, int count) {
        if (closed) {
            return 0;
        }
        for (int i = 0; i < count; i++) {
            try {
                chunks[i] = take(sizeClass);
            } catch (RuntimeException e) {
                if (i == 0) {
                    throw e;
                }
                return i; // what was taken is usable; the next refill reports the failure
            }
            offsets[i] = takenOffset;
        }
        return count;
    }

    /** Takes back slots from a thread cache. */
    synchronized void giveBackBatch(int sizeClass, Chunk[] chunks, int[] offsets, int from, int to) {
        for (int i = from; i < to; i++) {
            giveBack(sizeClass, chunks[i], offsets[i]);
            chunks[i] = null;
        }
    }

    /** Takes one slot: returns its chunk and leaves its offset in {@link #takenOffset}. Holds the lock. */
    private Chunk take(int sizeClass) {
        int size = classSize(sizeClass);
        if (size >= PAGE_SIZE) {
            Chunk chunk = takePages(size / PAGE_SIZE);
            takenOffset = takenPage * PAGE_SIZE;
            takenBytes += size;
            return chunk;
        }
        Slab slab = partialSlabs[sizeClass];
        if (slab == null) {
            Chunk chunk = takePages(1);
            int page = takenPage;
            slab = chunk.slabs[page];
            if (slab == null) {
                slab = chunk.slabs[page] = new Slab(chunk, page, PAGE_SIZE);
            }
            slab.init(sizeClass, size, PAGE_SIZE);
            link(slab);
        }
        takenOffset = slab.allocate();
        if (slab.isFull()) {
            unlink(slab);
        }
        takenBytes += size;
        return slab.chunk;
    }

    private void giveBack(int sizeClass, Chunk chunk, int offset) {
        if (closed) {
            return; // the chunk is already freed
        }
        int size = classSize(sizeClass);
        takenBytes -= size;
        if (size >= PAGE_SIZE) {
            givePagesBack(chunk, offset / PAGE_SIZE, size / PAGE_SIZE);
            return;
        }
        Slab slab = chunk.slabs[offset / PAGE_SIZE];
        boolean wasFull = slab.isFull();
        slab.free(offset);
        if (slab.isEmpty()) {
            if (!wasFull) {
                unlink(slab);
            }
            givePagesBack(chunk, slab.page, 1);
        } else if (wasFull) {
            link(slab);
        }
    }

    /** Takes an aligned run of pages: returns its chunk and leaves the first page in {@link #takenPage}. */
    private Chunk takePages(int pages) {
        // Indexed, not for-each: an iterator per page-run allocation was the loop's heap per 1 MiB echo.
        for (int i = 0; i < pooledChunks.size(); i++) {
            Chunk chunk = pooledChunks.get(i);
            boolean wasEmpty = chunk.isEmpty();
            int page = chunk.allocatePages(pages);
            if (page >= 0) {
                if (wasEmpty) {
                    emptyChunks--;
                }
                takenPage = page;
                return chunk;
            }
        }
        Chunk chunk = Chunk.create(chunkSize, PAGE_SIZE, registrar, registeredBytes, pageMode);
        pooledChunks.add(chunk);
        registered(chunk, 1);
        takenPage = chunk.allocatePages(pages);
        return chunk;
    }

    private void givePagesBack(Chunk chunk, int page, int pages) {
        chunk.freePages(page, pages);
        if (chunk.isEmpty() && ++emptyChunks > maxEmptyChunks) {
            emptyChunks--;
            pooledChunks.remove(chunk);
            destroy(chunk);
        }
    }

    private synchronized Chunk allocateDedicated(int capacity) {
        ensureOpen();
        long size = capacity >= Chunk.HUGE_PAGE_SIZE || pageMode == PageMode.EXPLICIT
                ? roundUp(capacity, Chunk.HUGE_PAGE_SIZE) : roundUp(capacity, Chunk.OS_PAGE_SIZE);
        Chunk chunk = Chunk.create(size, 0, registrar, registeredBytes, pageMode);
        dedicatedChunks.add(chunk);
        registered(chunk, 1);
        takenBytes += Math.min(chunk.size, Integer.MAX_VALUE); // the buffer's slot length, which free() gives back
        return chunk;
    }

    private void destroy(Chunk chunk) {
        registered(chunk, -1);
        releasedChunks++;
        chunk.free();
    }

    /** A chunk was registered ({@code +1}) or is about to be freed ({@code -1}). Holds the lock. */
    private void registered(Chunk chunk, int sign) {
        registeredBytes += sign * chunk.size;
        if (chunk.backingPageSize == Chunk.HUGE_PAGE_SIZE) {
            hugePageBytes += sign * chunk.size;
        }
        if (sign > 0) {
            lastPageSize = chunk.backingPageSize;
        }
        chunkCount += sign;
    }

    private void link(Slab slab) {
        Slab head = partialSlabs[slab.sizeClass];
        slab.prev = null;
        slab.next = head;
        if (head != null) {
            head.prev = slab;
        }
        partialSlabs[slab.sizeClass] = slab;
    }

    private void unlink(Slab slab) {
        if (slab.prev != null) {
            slab.prev.next = slab.next;
        } else {
            partialSlabs[slab.sizeClass] = slab.next;
        }
        if (slab.next != null) {
            slab.next.prev = slab.prev;
        }
        slab.prev = null;
        slab.next = null;
    }

    private static long roundUp(long value, long multiple) {
        return (value + multiple - 1) / multiple * multiple;
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("RdmaByteBufAllocator is closed");
        }
    }

    /**
     * Returns what the calling thread caches to the shared pool. A cached slot keeps its chunk from being empty,
     * so after a burst an event loop's cache can pin chunks nobody uses: the transport calls this on the loop
     * thread once its connections have been quiet for a while. Must run on the thread that owns the cache.
     */
    public void trimCurrentThreadCache() {
        if (threadCaches.isSet()) {
            threadCaches.get().flush();
        }
    }

    /**
     * Deregisters and frees every chunk. Buffers still alive fail on access; releasing them is harmless.
     * Idempotent.
     */
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        threadCaches.remove();
        List<Chunk> all = new ArrayList<>(pooledChunks);
        all.addAll(dedicatedChunks);
        pooledChunks.clear();
        dedicatedChunks.clear();
        Arrays.fill(partialSlabs, null);
        emptyChunks = 0;
        RuntimeException failure = null;
        for (Chunk chunk : all) {
            registered(chunk, -1);
            try {
                chunk.free();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * The device went away: deregisters every chunk now, keeping its memory, so that the protection domain can go
     * while buffers of this pool are still held (they stay readable and writable, and are freed as usual). The pool
     * goes on with memory no device knows (chunks made from now on are not registered): a buffer of it is copied
     * by a connection of another device, like any foreign buffer. Idempotent.
     */
    public synchronized void deregister() {
        if (deregistered) {
            return;
        }
        deregistered = true;
        registrar = UNREGISTERED;
        RuntimeException failure = null;
        List<Chunk> all = new ArrayList<>(pooledChunks);
        all.addAll(dedicatedChunks);
        for (Chunk chunk : all) {
            try {
                chunk.deregister();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** Whether {@link #deregister()} was called. */
    public boolean isDeregistered() {
        return deregistered;
    }

    /** What a pool whose device went away registers with: nothing. */
    private static final MemoryRegistrar UNREGISTERED = chunk -> new MemoryRegistrar.Registration() {
        @Override
        public int lkey() {
            return 0;
        }

        @Override
        public void close() {
        }
    };

    /** Bytes held by live buffers (whole slots); exact while no thread allocates or releases. */
    public long usedMemory() {
        long cached = 0;
        for (ThreadCache cache : caches) {
            cached += cache.cachedBytes();
        }
        synchronized (this) {
            return takenBytes - cached;
        }
    }

    /** Bytes currently registered with the device, cached and free slots included. */
    public long registeredMemory() {
        return deregistered ? 0 : registeredBytes;
    }

    /** Of {@link #registeredMemory()}: the bytes on 2 MiB pages (explicit or transparent huge pages). */
    public long hugePageMemory() {
        return hugePageBytes;
    }

    /**
     * The size of the pages that back the chunk registered last (2 MiB or 4 KiB), as obtained, not as asked for;
     * 0 before the first chunk.
     */
    public long pageSize() {
        return lastPageSize;
    }

    public PageMode pageMode() {
        return pageMode;
    }

    /** Chunks currently registered, pooled and dedicated. */
    public int chunkCount() {
        return chunkCount;
    }

    /**
     * Chunks deregistered and freed so far: dedicated ones on release, pooled ones once empty beyond
     * {@code maxEmptyChunks}. Not those freed by {@link #close()}.
     */
    public long releasedChunks() {
        return releasedChunks;
    }

    public int maxEmptyChunks() {
        return maxEmptyChunks;
    }

    public int chunkSize() {
        return chunkSize;
    }

    public int maxPooledCapacity() {
        return maxPooledCapacity;
    }
}
