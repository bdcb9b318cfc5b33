package io.netty.contrib.channel.rdma.internal.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A block of native memory registered once with the device. A pooled chunk is split into pages handed out as
 * runs (one power-of-two size class each) or as {@link Slab}s of small slots; a dedicated chunk backs one buffer
 * larger than the pooled maximum. Pages are tracked under the pool's lock.
 */
final class Chunk {
    static final long OS_PAGE_SIZE = 4096;
    /** Transparent huge pages can only back 2 MiB-aligned ranges. */
    static final long HUGE_PAGE_SIZE = 2L << 20;

    /**
     * Shared, so buffers may be used and released on any thread and the chunk freed from any thread. Closing it
     * unmaps the memory ({@link MappedMemory}): the pages go back to the system at once.
     */
    private final Arena arena;
    final MemorySegment memory;
    final long address;
    final long size;
    /** The size of the pages backing the chunk: {@link #OS_PAGE_SIZE} or {@link #HUGE_PAGE_SIZE}. */
    final long backingPageSize;
    final int lkey;
    private MemoryRegistrar.Registration registration;

    // Page bookkeeping; null for a dedicated chunk.
    final Slab[] slabs;
    private final long[] usedPages;
    final int pageCount;
    int freePages;

    private Chunk(Arena arena, MemorySegment memory, long backingPageSize, MemoryRegistrar.Registration registration,
                  int lkey, int pageSize) {
        this.arena = arena;
        this.memory = memory;
        this.backingPageSize = backingPageSize;
        this.registration = registration;
        address = memory.address();
        size = memory.byteSize();
        this.lkey = lkey;
        if (pageSize > 0) {
            pageCount = (int) (size / pageSize);
            slabs = new Slab[pageCount];
            usedPages = new long[(pageCount + 63) >>> 6];
            freePages = pageCount;
        } else {
            pageCount = 0;
            slabs = null;
            usedPages = null;
        }
    }

    /**
     * Allocates, touches and registers a chunk on the pages {@code mode} asks for. {@code pageSize} is 0 for a
     * dedicated chunk.
     *
     * @throws MemoryRegistrationException if the registrar refuses; nothing is left allocated
     * @throws HugePagesUnavailableException if {@code mode} requires explicit huge pages and there are none
     */
    static Chunk create(long size, int pageSize, MemoryRegistrar registrar, long alreadyRegistered, PageMode mode) {
        Arena arena = Arena.ofShared();
        try {
            MappedMemory.Mapping mapping = MappedMemory.map(arena, size, mode);
            MemorySegment memory = mapping.memory();
            MemoryRegistrar.Registration registration;
            try {
                registration = registrar.register(memory);
            } catch (RuntimeException e) {
                throw MemoryRegistrationException.of(size, alreadyRegistered, e);
            }
            PinnedMemoryWatch.registered();
            return new Chunk(arena, memory, mapping.pageSize(), registration, registration.lkey(), pageSize);
        } catch (Throwable t) {
            arena.close();
            throw t;
        }
    }

    /** Memory registered and freed by someone else (an {@link ExternalRegion}); never part of a pool. */
    static Chunk external(MemorySegment memory, int lkey) {
        return new Chunk(null, memory, OS_PAGE_SIZE, null, lkey, 0);
    }

    boolean isDedicated() {
        return slabs == null;
    }

    boolean isEmpty() {
        return freePages == pageCount;
    }

    /** Finds {@code pages} (a power of two) free pages aligned to their count and marks them used; -1 if none. */
    int allocatePages(int pages) {
        if (freePages < pages) {
            return -1;
        }
        for (int page = 0; page + pages <= pageCount; page += pages) {
            if (isFree(page, pages)) {
                mark(page, pages, true);
                freePages -= pages;
                return page;
            }
        }
        return -1;
    }

    void freePages(int page, int pages) {
        mark(page, pages, false);
        freePages += pages;
    }

    private boolean isFree(int page, int pages) {
        if (pages >= 64) {
            for (int word = page >>> 6, end = (page + pages) >>> 6; word < end; word++) {
                if (usedPages[word] != 0) {
                    return false;
                }
            }
            return true;
        }
        return (usedPages[page >>> 6] & mask(page, pages)) == 0;
    }

    private void mark(int page, int pages, boolean used) {
        if (pages >= 64) {
            for (int word = page >>> 6, end = (page + pages) >>> 6; word < end; word++) {
                usedPages[word] = used ? -1L : 0;
            }
        } else if (used) {
            usedPages[page >>> 6] |= mask(page, pages);
        } else {
            usedPages[page >>> 6] &= ~mask(page, pages);
        }
    }

    private static long mask(int page, int pages) {
        return ((1L << pages) - 1) << (page & 63);
    }

    /**
     * Deregisters, then unmaps. Buffers still pointing here fail on access instead of touching freed memory.
     */
    void free() {
        try {
            deregister();
        } finally {
            arena.close();
        }
    }

    /**
     * Ends the chunk's registration now (its device is gone); the memory stays until {@link #free()}, so buffers
     * over it stay readable. Idempotent.
     */
    synchronized void deregister() {
        MemoryRegistrar.Registration r = registration;
        registration = null;
        if (r != null) {
            r.close();
        }
    }
}
