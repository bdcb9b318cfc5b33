package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.AnonymousMappings;
import io.netty.contrib.channel.rdma.internal.verbs.Errno;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Anonymous private mappings of their own ({@code mmap}/{@code munmap}) for the memory of {@link Chunk}s, on the
 * pages a {@link PageMode} asks for, touched (every page present) before they are handed out.
 *
 * <p>Not {@code malloc}: glibc serves a freed block's size from its heaps from then on (its mmap threshold rises
 * to the largest block freed, up to 32 MiB), and memory freed inside a heap stays resident, so a server whose
 * pool had grown by 64 MiB kept the 64 MiB after every chunk was freed. A mapping of its own is given back to the
 * system by {@code munmap} at once.
 */
public final class MappedMemory {
    private static final Path THP_ENABLED = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");

    private MappedMemory() {
    }

    /** Touched memory and the size of the pages that back it: {@link Chunk#OS_PAGE_SIZE} or 2 MiB. */
    public record Mapping(MemorySegment memory, long pageSize) {
    }

    /**
     * {@code size} bytes (a multiple of the OS page), unmapped when {@code arena} closes, every page touched. On huge
     * pages when {@code size} is a multiple of 2 MiB and {@code mode} and the system allow; a multiple of 2 MiB is
     * 2 MiB-aligned whatever its pages, so that THP can back it.
     *
     * @throws OutOfMemoryError if the system refuses the mapping
     * @throws HugePagesUnavailableException if {@code mode} is {@link PageMode#EXPLICIT} and the hugetlb pool has too
     *                                       few free pages
     */
    public static Mapping map(Arena arena, long size, PageMode mode) {
        boolean hugeSized = size % Chunk.HUGE_PAGE_SIZE == 0;
        if (mode == PageMode.EXPLICIT && !hugeSized) {
            throw new IllegalArgumentException("size: " + size + " (expected: a multiple of 2 MiB for explicit huge"
                    + " pages)");
        }
        if (hugeSized && (mode == PageMode.EXPLICIT || mode == PageMode.AUTO)) {
            long address = AnonymousMappings.mapHuge(size);
            if (address >= 0) {
                // Reserved at mmap, so touching cannot fault for want of pages.
                return new Mapping(touch(segment(arena, address, size), Chunk.HUGE_PAGE_SIZE), Chunk.HUGE_PAGE_SIZE);
            }
            if (mode == PageMode.EXPLICIT) {
                throw HugePagesUnavailableException.of(size, (int) -address);
            }
        }
        MemorySegment memory = mapAligned(arena, size, hugeSized ? Chunk.HUGE_PAGE_SIZE : Chunk.OS_PAGE_SIZE);
        long address = memory.address();
        if (!hugeSized) {
            return new Mapping(touch(memory, Chunk.OS_PAGE_SIZE), Chunk.OS_PAGE_SIZE);
        }
        if (mode == PageMode.OFF || !transparentHugePagesAllowed()) {
            if (mode == PageMode.OFF) {
                AnonymousMappings.advise(address, size, AnonymousMappings.MADV_NOHUGEPAGE);
            }
            return new Mapping(touch(memory, Chunk.OS_PAGE_SIZE), Chunk.OS_PAGE_SIZE);
        }
        AnonymousMappings.advise(address, size, AnonymousMappings.MADV_HUGEPAGE);
        touch(memory, Chunk.OS_PAGE_SIZE);
        // Faults may have got 4 KiB pages (memory fragmented): collapse before registration pins them; after it,
        // moving a page would break the device's mapping. 0 also when the range is already on huge pages.
        int collapse = AnonymousMappings.advise(address, size, AnonymousMappings.MADV_COLLAPSE);
        boolean huge = collapse == 0 || collapse == Errno.EINVAL && Smaps.anonHugeBytes(address) >= size;
        return new Mapping(memory, huge ? Chunk.HUGE_PAGE_SIZE : Chunk.OS_PAGE_SIZE);
    }

    /** Whether THP is {@code always} or {@code madvise} ({@code [madvise]} in sysfs), so advising can help. */
    static boolean transparentHugePagesAllowed() {
        try {
            String enabled = Files.readString(THP_ENABLED);
            return enabled.contains("[always]") || enabled.contains("[madvise]");
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static MemorySegment mapAligned(Arena arena, long size, long alignment) {
        // Map enough to contain an aligned range, then give back the slack on either side.
        long mapped = size + alignment - Chunk.OS_PAGE_SIZE;
        long start = AnonymousMappings.map(mapped);
        long aligned = (start + alignment - 1) / alignment * alignment;
        AnonymousMappings.unmap(start, aligned - start);
        AnonymousMappings.unmap(aligned + size, start + mapped - (aligned + size));
        return segment(arena, aligned, size);
    }

    private static MemorySegment segment(Arena arena, long address, long size) {
        return MemorySegment.ofAddress(address).reinterpret(size, arena, s -> AnonymousMappings.unmap(address, size));
    }

    /**
     * Registration pins the pages present now. A page first touched later (or shared copy-on-write with the zero
     * page) would be replaced by a new physical page the device never sees: silent corruption.
     */
    private static MemorySegment touch(MemorySegment memory, long step) {
        for (long offset = 0; offset < memory.byteSize(); offset += step) {
            memory.set(ValueLayout.JAVA_BYTE, offset, (byte) 0);
        }
        return memory;
    }
}
