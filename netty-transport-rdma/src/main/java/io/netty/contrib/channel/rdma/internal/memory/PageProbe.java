package io.netty.contrib.channel.rdma.internal.memory;

import java.lang.foreign.Arena;

/** What a chunk of the pool would be backed by now: maps, touches and unmaps one, as the pool does. No Netty class. */
public final class PageProbe {
    private PageProbe() {
    }

    /** The page size a 4 MiB chunk gets with {@code mode} now (2 MiB or 4 KiB); -1 when explicit pages are missing. */
    public static long pageSize(PageMode mode) {
        try (Arena arena = Arena.ofShared()) {
            return MappedMemory.map(arena, 2 * Chunk.HUGE_PAGE_SIZE, mode).pageSize();
        } catch (HugePagesUnavailableException e) {
            return -1;
        }
    }

    /** Whether THP is {@code always} or {@code madvise}. */
    public static boolean transparentHugePagesAllowed() {
        return MappedMemory.transparentHugePagesAllowed();
    }
}
