package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code SO_KEEPALIVE}: a peer that stops answering without a disconnect (a host that hangs, or a partition) is
 * noticed by a connection that sends nothing. The peer is a JVM of its own ({@link KeepAlivePeer}) that connects
 * and then idles; the server's child, with {@code SO_KEEPALIVE} and a 200 ms idle time, probes it while it is
 * alive (zero-length RDMA WRITEs its device acknowledges: the child stays open), then the peer's process is stopped
 * ({@code SIGSTOP}: its rdma_cm connection stays, nothing of it answers) and the child closes, its cause retry
 * exhaustion, within the idle time and the retry budget. The retry count is the client's (rdma_cm negotiates it):
 * the peer asks for 1, so the probe has two tries; the software device makes a try last at least 500 ms (on a
 * fabric ACK_TIMEOUT 12 would be 16.8 ms). The send-stall watchdog is set well past that budget, so that the close
 * is the device's verdict, not the watchdog's.
 */
@Timeout(120)
class RdmaKeepAliveTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void anIdleConnectionFindsAPeerThatStoppedAnswering() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().sendStallTimeoutMillis(15_000)));
        CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
        CompletableFuture<Throwable> cause = new CompletableFuture<>();
        Process peer = null;
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(ChannelOption.SO_KEEPALIVE, true)
                    .childOption(RdmaChannelOption.KEEPALIVE_IDLE_MILLIS, 200)
                    .childOption(RdmaChannelOption.ACK_TIMEOUT, 12)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            accepted.complete((RdmaChannel) ch);
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                    cause.complete(t);
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            peer = startPeer(address);
            RdmaChannel child = accepted.get(60, TimeUnit.SECONDS);
            assertThat(child.config().isKeepAlive()).isTrue();
            assertThat(child.connectionSettings().retryCount()).as("the retry count the peer asked for").isEqualTo(1);

            // Alive and idle: probed, acknowledged, open.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (probes(child) < 3 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertThat(probes(child)).as("keepalive probes of the idle connection").isGreaterThanOrEqualTo(3);
            assertThat(child.isActive()).as("a peer that acknowledges the probes keeps its connection").isTrue();
            assertThat(cause).isNotDone();

            // Stopped: the next probe is never acknowledged, its retries run out.
            signal(peer, "STOP");
            long stopped = System.nanoTime();
            assertThat(child.closeFuture().await(10, TimeUnit.SECONDS))
                    .as("the child closed after its peer stopped answering").isTrue();
            long closedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped);
            assertThat(cause.getNow(null)).as("the child's cause").isNotNull()
                    .hasMessageContaining("RETRY_EXC_ERR");
            // Idle time (200 ms) + check interval (250 ms) + two tries (about 1.1 s here), with room for a busy machine.
            assertThat(closedMillis).as("ms from SIGSTOP to the close").isLessThan(5000);
            server.close().sync();
        } finally {
            if (peer != null) {
                peer.destroyForcibly();
                peer.waitFor(10, TimeUnit.SECONDS);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static long probes(RdmaChannel child) throws Exception {
        return child.eventLoop().submit(() -> child.metric().keepAliveProbes()).get();
    }

    private static Process startPeer(InetSocketAddress address) throws Exception {
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString(), "--enable-native-access=ALL-UNNAMED", "-cp", classPath));
        for (String property : new String[] {NativeLibraries.LIBRARY_PATH_PROPERTY, TestAddress.PROPERTY,
                RdmaConnection.KERNEL_RXE_RINGS_PROPERTY}) {
            if (System.getProperty(property) != null) {
                command.add("-D" + property + "=" + System.getProperty(property));
            }
        }
        command.addAll(List.of(KeepAlivePeer.class.getName(), address.getAddress().getHostAddress(),
                String.valueOf(address.getPort())));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.equals("CONNECTED")) {
                // Keep draining its output, so that it never blocks on a full pipe.
                Thread drain = new Thread(() -> out.lines().forEach(l -> { }), "keepalive-peer-output");
                drain.setDaemon(true);
                drain.start();
                return process;
            }
            seen.append(line).append('\n');
        }
        throw new AssertionError("the peer exited before it connected:\n" + seen);
    }

    private static void signal(Process process, String signal) throws Exception {
        Process kill = new ProcessBuilder("kill", "-" + signal, String.valueOf(process.pid())).inheritIO().start();
        assertThat(kill.waitFor(10, TimeUnit.SECONDS) && kill.exitValue() == 0).as("kill -%s", signal).isTrue();
    }
}
