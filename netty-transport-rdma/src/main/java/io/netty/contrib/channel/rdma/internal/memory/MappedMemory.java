package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.AnonymousMappings;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Anonymous private mappings of their own ({@code mmap}/{@code munmap}) for the memory of {@link Chunk}s.
 *
 * <p>Not {@code malloc}: glibc serves a freed block's size from its heaps from then on (its mmap threshold rises
 * to the largest block freed, up to 32 MiB), and memory freed inside a heap stays resident, so a server whose
 * pool had grown by 64 MiB kept the 64 MiB after every chunk was freed. A mapping of its own is given back to the
 * system by {@code munmap} at once.
 */
final class MappedMemory {
    private MappedMemory() {
    }

    /**
     * {@code size} bytes (a multiple of the OS page) aligned to {@code alignment} (a multiple of the OS page),
     * unmapped when {@code arena} closes.
     *
     * @throws OutOfMemoryError if the system refuses the mapping
     */
    static MemorySegment map(Arena arena, long size, long alignment) {
        // Map enough to contain an aligned range, then give back the slack on either side.
        long mapped = size + alignment - Chunk.OS_PAGE_SIZE;
        long start = AnonymousMappings.map(mapped);
        long aligned = (start + alignment - 1) / alignment * alignment;
        AnonymousMappings.unmap(start, aligned - start);
        AnonymousMappings.unmap(aligned + size, start + mapped - (aligned + size));
        return MemorySegment.ofAddress(aligned).reinterpret(size, arena, s -> AnonymousMappings.unmap(aligned, size));
    }
}
