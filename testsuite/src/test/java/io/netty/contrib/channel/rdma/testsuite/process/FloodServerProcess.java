package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaIoHandler;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The server of {@link FloodRecoveryTest}, in its own JVM: an echo server with default options on two loops.
 * Prints {@code PORT <n>}; answers each {@code STATUS} line on standard input with {@code STATUS rss=<bytes>
 * rssTrimmed=<bytes> shmem=<bytes> open=<channels> chunks=<n> registered=<bytes> used=<bytes> released=<n> maxEmpty=<n>
 * <kind>=<count>...}: the resident set after a GC ({@code rss}), and again after {@code malloc_trim}
 * ({@code rssTrimmed}: what malloc keeps free no longer counts), the default allocator's metric and the software
 * device's object counts. When its standard input closes it shuts down and prints {@code FINAL <kind>=<count>...}.
 */
public final class FloodServerProcess {
    private FloodServerProcess() {
    }

    public static void main(String[] args) throws Throwable {
        AtomicInteger open = new AtomicInteger();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        Channel server = ConnectionsServerProcess.echoServer(group, open);
        System.out.println("PORT " + ((java.net.InetSocketAddress) server.localAddress()).getPort());
        System.out.flush();
        RdmaByteBufAllocator.Metric pool = RdmaByteBufAllocator.defaultAllocator().metric();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("STATUS")) {
                System.gc();
                long rss = ConnectionsServerProcess.rss();
                ConnectionsServerProcess.trimMalloc();
                System.out.println("STATUS rss=" + rss + " rssTrimmed=" + ConnectionsServerProcess.rss()
                        + " shmem=" + ConnectionsServerProcess.status("RssShmem:") + " open=" + open.get()
                        + " chunks=" + pool.chunkCount() + " registered="
                        + pool.registeredMemory() + " used=" + pool.usedDirectMemory() + " released="
                        + pool.releasedChunks() + " maxEmpty=" + pool.maxEmptyChunks()
                        + ConnectionsServerProcess.counts());
                System.out.flush();
            }
        }
        server.close().sync();
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        System.out.println("FINAL" + ConnectionsServerProcess.counts());
    }
}
