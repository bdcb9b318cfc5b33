package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig.HugePages;
import io.netty.contrib.channel.rdma.internal.memory.Smaps;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.util.concurrent.Promise;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The registered pool on huge pages, seen by the kernel ({@code /proc/self/smaps} of a buffer's mapping), with a
 * 1 MiB echo over it: transparent huge pages where THP is {@code madvise} or {@code always}, plain pages with
 * {@code OFF}, a clear error when explicit pages are required and none are reserved, and, as root, explicit pages
 * reserved for the test ({@code vm.nr_hugepages}, restored after).
 */
@Timeout(120)
class RdmaHugePagesTest {
    private static final long HUGE = 2L << 20;
    private static final Path NR_HUGEPAGES = Path.of("/proc/sys/vm/nr_hugepages");

    @Test
    void transparentHugePagesWhereTheKernelAllowsThem() throws Exception {
        String thp = read(Path.of("/sys/kernel/mm/transparent_hugepage/enabled"));
        Assumptions.assumeTrue(thp.contains("[madvise]") || thp.contains("[always]"),
                "transparent huge pages are " + thp.trim() + " here");
        Assumptions.assumeTrue(freeHugePages() == 0, "explicit huge pages are free: AUTO would take those");
        for (HugePages mode : new HugePages[] {HugePages.AUTO, HugePages.TRANSPARENT}) {
            withPool(mode, (alloc, buf) -> {
                assertThat(alloc.metric().pageSize()).as(mode + ": page size obtained").isEqualTo(HUGE);
                assertThat(alloc.metric().hugePageMemory()).isEqualTo(alloc.metric().registeredMemory());
                Smaps.Entry e = Smaps.entry(buf.memoryAddress());
                assertThat(e).isNotNull();
                assertThat(e.anonHugePages()).as(mode + ": AnonHugePages of the chunk's mapping %s", e)
                        .isGreaterThanOrEqualTo(RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE);
            });
        }
    }

    @Test
    void offMeansOrdinaryPages() throws Exception {
        withPool(HugePages.OFF, (alloc, buf) -> {
            assertThat(alloc.metric().pageSize()).isEqualTo(4096);
            assertThat(alloc.metric().hugePageMemory()).isZero();
            Smaps.Entry e = Smaps.entry(buf.memoryAddress());
            assertThat(e).isNotNull();
            assertThat(e.kernelPageSize()).isEqualTo(4096);
            assertThat(e.anonHugePages()).as("AnonHugePages of %s", e).isZero();
        });
    }

    @Test
    void explicitPagesRequiredButNoneReserved() throws Exception {
        Assumptions.assumeTrue(freeHugePages() == 0, "explicit huge pages are free here");
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().hugePages(HugePages.EXPLICIT)));
        try {
            RdmaByteBufAllocator alloc = RdmaByteBufAllocator.defaultAllocator();
            assertThat(alloc.metric().hugePages()).isEqualTo(HugePages.EXPLICIT);
            assertThatThrownBy(() -> alloc.directBuffer(100))
                    .hasMessageStartingWith("explicit 2 MiB huge pages for a chunk of 4 MiB are not available")
                    .hasMessageContaining("HugePages_Free 0")
                    .hasMessageContaining("sysctl vm.nr_hugepages=N")
                    .hasMessageContaining("HugePages.AUTO");
            assertThat(alloc.metric().chunkCount()).isZero();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void explicitPagesReservedForTheTest() throws Exception {
        Assumptions.assumeTrue(Files.isWritable(NR_HUGEPAGES), "cannot reserve huge pages (not root)");
        String before = read(NR_HUGEPAGES).trim();
        try {
            Files.writeString(NR_HUGEPAGES, String.valueOf(Long.parseLong(before) + 4));
            Assumptions.assumeTrue(freeHugePages() >= 4, "the kernel reserved fewer than 4 huge pages");
            for (HugePages mode : new HugePages[] {HugePages.EXPLICIT, HugePages.AUTO}) {
                withPool(mode, (alloc, buf) -> {
                    assertThat(alloc.metric().pageSize()).as(mode.name()).isEqualTo(HUGE);
                    Smaps.Entry e = Smaps.entry(buf.memoryAddress());
                    assertThat(e).isNotNull();
                    assertThat(e.kernelPageSize()).as(mode + ": KernelPageSize of %s", e).isEqualTo(HUGE);
                });
            }
        } finally {
            Files.writeString(NR_HUGEPAGES, before);
        }
        assertThat(read(NR_HUGEPAGES).trim()).isEqualTo(before);
    }

    @Test
    void theFirstLoopsChooseALaterOneIsToldOnce() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(CapturedLog.available(),
                "Netty logs through SLF4J on this class path (the rxe-vm guest's): its warning cannot be captured");
        EventLoopGroup first = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().hugePages(HugePages.OFF)));
        try (CapturedLog log = new CapturedLog()) {
            first.submit(() -> { }).sync();
            RdmaByteBufAllocator.defaultAllocator().directBuffer(64).release();
            EventLoopGroup later = new MultiThreadIoEventLoopGroup(3,
                    RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().hugePages(HugePages.TRANSPARENT)));
            try {
                for (var loop : later) {
                    loop.submit(() -> { }).sync();
                }
                assertThat(RdmaByteBufAllocator.defaultAllocator().metric().hugePages()).isEqualTo(HugePages.OFF);
                assertThat(log.entries()).filteredOn(e -> e.message().contains("hugePages(TRANSPARENT) ignored"))
                        .as("one line for three loops").hasSize(1)
                        .allSatisfy(e -> assertThat(e.message()).contains("uses OFF"));
            } finally {
                later.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            }
        } finally {
            first.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    interface PoolCheck {
        void check(RdmaByteBufAllocator alloc, ByteBuf buf) throws Exception;
    }

    /** Loops with {@code mode}, a buffer of the pool checked by {@code check}, then a 1 MiB echo from the pool. */
    private static void withPool(HugePages mode, PoolCheck check) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().hugePages(mode)));
        try {
            RdmaByteBufAllocator alloc = RdmaByteBufAllocator.defaultAllocator();
            assertThat(alloc.metric().hugePages()).as("no other RDMA loop chose the pool's pages").isEqualTo(mode);
            ByteBuf probe = alloc.directBuffer(64);
            try {
                check.check(alloc, probe);
            } finally {
                probe.release();
            }
            echo(group, 1 << 20);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static void echo(EventLoopGroup group, int size) throws Exception {
        byte[] data = new byte[size];
        ThreadLocalRandom.current().nextBytes(data);
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new Echo()).bind(TestAddress.get(), 0).sync().channel();
        Promise<ByteBuf> received = group.next().newPromise();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new Collect(size, received)).connect(server.localAddress()).sync().channel();
        try {
            ByteBuf out = client.alloc().directBuffer(size).writeBytes(data);
            client.writeAndFlush(out).sync();
            ByteBuf back = received.get(30, TimeUnit.SECONDS);
            try {
                assertThat(back).isEqualTo(Unpooled.wrappedBuffer(data));
            } finally {
                back.release();
            }
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    private static long freeHugePages() throws IOException {
        for (String line : read(Path.of("/proc/meminfo")).split("\n")) {
            if (line.startsWith("HugePages_Free:")) {
                return Long.parseLong(line.substring("HugePages_Free:".length()).trim());
            }
        }
        return 0;
    }

    private static String read(Path p) throws IOException {
        return Files.exists(p) ? Files.readString(p) : "";
    }

    @Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    private static final class Collect extends ChannelInboundHandlerAdapter {
        private final int size;
        private final Promise<ByteBuf> done;
        private ByteBuf all;

        Collect(int size, Promise<ByteBuf> done) {
            this.size = size;
            this.done = done;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            if (all == null) {
                all = Unpooled.buffer(size);
            }
            all.writeBytes(buf);
            buf.release();
            if (all.readableBytes() >= size) {
                done.trySuccess(all);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
        }
    }
}
