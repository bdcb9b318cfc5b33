package io.netty.contrib.channel.rdma.internal.memory;

/**
 * One page of a chunk split into equal slots of a small size class. Lives in a doubly linked list of slabs that
 * still have free slots. Guarded by the pool's lock.
 */
final class Slab {
    final Chunk chunk;
    final int page;
    private final int pageOffset;
    private final long[] freeSlots;
    int sizeClass;
    private int slotShift;
    private int slotCount;
    private int freeCount;
    private int searchFrom;
    Slab prev;
    Slab next;

    Slab(Chunk chunk, int page, int pageSize) {
        this.chunk = chunk;
        this.page = page;
        pageOffset = page * pageSize;
        freeSlots = new long[Math.max(1, pageSize / RegisteredMemoryPool.MIN_SIZE / 64)];
    }

    /** Reuses this page for {@code sizeClass}, all slots free. */
    void init(int sizeClass, int slotSize, int pageSize) {
        this.sizeClass = sizeClass;
        slotShift = Integer.numberOfTrailingZeros(slotSize);
        slotCount = pageSize >>> slotShift;
        freeCount = slotCount;
        searchFrom = 0;
        int words = slotCount >>> 6;
        for (int i = 0; i < freeSlots.length; i++) {
            freeSlots[i] = i < words ? -1L : 0;
        }
        if ((slotCount & 63) != 0) {
            freeSlots[words] = (1L << (slotCount & 63)) - 1;
        }
    }

    boolean isFull() {
        return freeCount == 0;
    }

    boolean isEmpty() {
        return freeCount == slotCount;
    }

    /** Takes a free slot; returns its offset in the chunk. Only called when not full. */
    int allocate() {
        for (int word = searchFrom; ; word++) {
            long bits = freeSlots[word];
            if (bits != 0) {
                freeSlots[word] = bits & (bits - 1);
                freeCount--;
                searchFrom = word;
                int slot = (word << 6) | Long.numberOfTrailingZeros(bits);
                return pageOffset + (slot << slotShift);
            }
        }
    }

    void free(int offset) {
        int slot = (offset - pageOffset) >>> slotShift;
        freeSlots[slot >>> 6] |= 1L << (slot & 63);
        freeCount++;
        searchFrom = Math.min(searchFrom, slot >>> 6);
    }
}
