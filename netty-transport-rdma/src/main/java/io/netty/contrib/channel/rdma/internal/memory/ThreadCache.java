package io.netty.contrib.channel.rdma.internal.memory;

/**
 * Slots one event-loop thread keeps per size class, so that steady-state allocation and release take no lock.
 * Refilled and drained in batches of half its capacity. Confined to its thread, except {@link #flush()} when the
 * thread ends.
 */
final class ThreadCache {
    private final RegisteredMemoryPool pool;
    private final Chunk[][] chunks;
    private final int[][] offsets;
    private final int[] counts;

    /** {@code capacities[sizeClass]} slots per class; 0 disables caching of that class. */
    ThreadCache(RegisteredMemoryPool pool, int[] capacities) {
        this.pool = pool;
        chunks = new Chunk[capacities.length][];
        offsets = new int[capacities.length][];
        counts = new int[capacities.length];
        for (int c = 0; c < capacities.length; c++) {
            chunks[c] = new Chunk[capacities[c]];
            offsets[c] = new int[capacities[c]];
        }
    }

    /** Points {@code buf} at a cached slot; false if this class is not cached here. */
    boolean allocate(int sizeClass, RegisteredByteBuf buf, int capacity) {
        Chunk[] classChunks = chunks[sizeClass];
        int count = counts[sizeClass];
        if (count == 0) {
            if (classChunks.length == 0) {
                return false;
            }
            count = pool.takeBatch(sizeClass, classChunks, offsets[sizeClass], Math.max(1, classChunks.length >>> 1));
            if (count == 0) {
                return false;
            }
        }
        count--;
        buf.setMemory(classChunks[count], offsets[sizeClass][count], RegisteredMemoryPool.classSize(sizeClass),
                capacity);
        classChunks[count] = null;
        counts[sizeClass] = count;
        return true;
    }

    /** Keeps a released slot; false if this class is not cached here. */
    boolean free(int sizeClass, Chunk chunk, int offset) {
        Chunk[] classChunks = chunks[sizeClass];
        int count = counts[sizeClass];
        if (count == classChunks.length) {
            if (count == 0) {
                return false;
            }
            int keep = count >>> 1;
            pool.giveBackBatch(sizeClass, classChunks, offsets[sizeClass], keep, count);
            count = keep;
        }
        classChunks[count] = chunk;
        offsets[sizeClass][count] = offset;
        counts[sizeClass] = count + 1;
        return true;
    }

    /** Returns every cached slot to the pool. */
    /** Bytes of the slots cached here; read by other threads for the pool's metric, so only approximately. */
    long cachedBytes() {
        long bytes = 0;
        for (int c = 0; c < counts.length; c++) {
            bytes += (long) counts[c] * RegisteredMemoryPool.classSize(c);
        }
        return bytes;
    }

    void flush() {
        for (int c = 0; c < counts.length; c++) {
            if (counts[c] > 0) {
                pool.giveBackBatch(c, chunks[c], offsets[c], 0, counts[c]);
                counts[c] = 0;
            }
        }
    }
}
