package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The server of {@link ManyConnectionsTest}, in its own JVM: an echo server with default options on two loops
 * that reports its footprint. Prints {@code PORT <n>}; answers each {@code STATUS} line on standard input with
 * {@code STATUS rss=<bytes> heap=<bytes> open=<channels> <kind>=<count>...} (the software device's object counts);
 * when its standard input closes it shuts down and prints {@code FINAL <kind>=<count>...}.
 */
public final class ConnectionsServerProcess {
    static final List<String> KINDS = List.of("qp", "cq", "srq", "mr", "mw", "pd", "cm_id", "comp_channel");

    private ConnectionsServerProcess() {
    }

    public static void main(String[] args) throws Throwable {
        AtomicInteger open = new AtomicInteger();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        Channel server = echoServer(group, open);
        System.out.println("PORT " + ((java.net.InetSocketAddress) server.localAddress()).getPort());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("STATUS")) {
                System.gc();
                long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
                trimMalloc();
                System.out.println("STATUS rss=" + rss() + " anon=" + status("RssAnon:") + " shmem="
                        + status("RssShmem:") + " heap=" + heap + " open=" + open.get() + counts());
                System.out.flush();
            }
        }
        server.close().sync();
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        System.out.println("FINAL" + counts());
    }

    /**
     * An echo server on {@code group} (default options) at an ephemeral port of the test host; {@code open} counts
     * its connections.
     */
    static Channel echoServer(EventLoopGroup group, AtomicInteger open) throws InterruptedException {
        return new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        open.incrementAndGet();
                        ch.closeFuture().addListener(f -> open.decrementAndGet());
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.write(msg);
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }
                        });
                    }
                }).bind(TestAddress.host(), 0).sync().channel();
    }

    /** Resident set size of this process in bytes. */
    static long rss() throws Exception {
        return status("VmRSS:");
    }

    /** A size in {@code /proc/self/status}, in bytes. */
    static long status(String field) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith(field)) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IllegalStateException("no " + field + " in /proc/self/status");
    }

    /**
     * Gives memory that malloc holds free back to the system ({@code malloc_trim(0)}), so that the resident set
     * counts what is in use: the JIT compilers' arenas, freed after a compilation, otherwise stay resident and
     * add a compilation's worth of noise to whichever measurement it fell in.
     */
    static void trimMalloc() throws Throwable {
        var symbol = Linker.nativeLinker().defaultLookup().find("malloc_trim");
        if (symbol.isPresent()) {
            int ignored = (int) Linker.nativeLinker().downcallHandle(symbol.get(),
                    FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_INT, JAVA_LONG)).invokeExact(0L);
        }
    }

    /** {@code " kind=count"} for each of {@link #KINDS}, or nothing off the software device. */
    static String counts() throws Throwable {
        var symbol = NativeLibraries.findIbverbs("softrdma_object_count");
        if (symbol.isEmpty()) {
            return "";
        }
        MethodHandle count = Linker.nativeLinker().downcallHandle(symbol.get(), FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        StringBuilder sb = new StringBuilder();
        try (Arena arena = Arena.ofConfined()) {
            for (String kind : KINDS) {
                sb.append(' ').append(kind).append('=').append((long) count.invokeExact(arena.allocateFrom(kind)));
            }
        }
        return sb.toString();
    }
}
