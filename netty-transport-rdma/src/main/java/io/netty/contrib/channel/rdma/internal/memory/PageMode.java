package io.netty.contrib.channel.rdma.internal.memory;

/**
 * Which pages back the pool's chunks ({@code RdmaIoHandlerConfig.HugePages} is the public face). Huge pages cut the
 * device's address translations: 1 GiB registered takes 262 144 entries in 4 KiB pages, 512 in 2 MiB pages.
 */
public enum PageMode {
    /** Explicit 2 MiB pages while the hugetlb pool has free ones, else transparent huge pages, else 4 KiB pages. */
    AUTO,
    /** Transparent huge pages where the kernel allows ({@code madvise} or {@code always}), else 4 KiB pages. */
    TRANSPARENT,
    /** Explicit 2 MiB pages only: a chunk the hugetlb pool cannot supply fails, naming the fix. */
    EXPLICIT,
    /** 4 KiB pages, also where THP is {@code always} ({@code MADV_NOHUGEPAGE}). */
    OFF
}
