package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.Errno;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Explicit huge pages were required ({@link PageMode#EXPLICIT}) and the kernel's hugetlb pool could not supply a
 * chunk. The message says what the pool holds and how to reserve pages.
 */
public final class HugePagesUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private HugePagesUnavailableException(String message) {
        super(message);
    }

    static HugePagesUnavailableException of(long size, int errno) {
        String meminfo;
        try {
            meminfo = Files.readString(Path.of("/proc/meminfo"));
        } catch (IOException | RuntimeException e) {
            meminfo = "";
        }
        return new HugePagesUnavailableException(message(size, errno, meminfo));
    }

    static String message(long size, int errno, String meminfo) {
        return "explicit 2 MiB huge pages for a chunk of " + MemoryRegistrationException.formatSize(size)
                + " are not available (mmap MAP_HUGETLB: " + Errno.name(errno) + "; HugePages_Free "
                + field(meminfo, "HugePages_Free:") + " of HugePages_Total " + field(meminfo, "HugePages_Total:")
                + "): reserve them (sysctl vm.nr_hugepages=N, or hugepages=N on the kernel command line; each chunk"
                + " takes " + size / Chunk.HUGE_PAGE_SIZE + "), or choose RdmaIoHandlerConfig.HugePages.AUTO";
    }

    private static String field(String text, String name) {
        for (String line : text.split("\n")) {
            if (line.startsWith(name)) {
                return line.substring(name.length()).trim();
            }
        }
        return "?";
    }
}
