package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.rdma.grpc.RdmaGrpc;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC server over RDMA: an ordinary {@link NettyServerBuilder} (from {@code io.grpc:grpc-netty}) set up by
 * {@link RdmaGrpc} (the RDMA server channel type, RDMA event loop groups and the registered allocator); nothing
 * else differs from gRPC over TCP.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp ... RpcServer [--address 127.0.0.1] [--port 7575]
 * </pre>
 */
public final class RpcServer {
    private final Server server;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;

    private RpcServer(Server server, EventLoopGroup boss, EventLoopGroup workers) {
        this.server = server;
        this.boss = boss;
        this.workers = workers;
    }

    public static void main(String[] args) throws Exception {
        Options options = Options.parse(args);
        SoftwareDevice.selectIfNoHardware();
        RpcServer server = start(options.address, options.port);
        System.err.println("gRPC server listening on " + options.address + ":" + server.port() + " over RDMA");
        Runtime.getRuntime().addShutdownHook(new Thread(server::stop, "rpc-server-stop"));
        server.server.awaitTermination();
    }

    /** Starts the server on {@code address:port} (port 0: any free port, see {@link #port()}). */
    static RpcServer start(String address, int port) throws IOException {
        EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        EventLoopGroup workers = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Server server = RdmaGrpc.serverBuilder(new InetSocketAddress(address, port), boss, workers)
                    .maxInboundMessageSize(RpcClient.MAX_MESSAGE_SIZE)
                    .addService(EchoService.definition())
                    .build()
                    .start();
            return new RpcServer(server, boss, workers);
        } catch (IOException | RuntimeException e) {
            boss.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            workers.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            throw e;
        }
    }

    int port() {
        return server.getPort();
    }

    /** Stops accepting calls, waits up to 5 s for those in progress, then frees the event loops. */
    void stop() {
        server.shutdown();
        try {
            if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
                server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            // gRPC does not shut down event loop groups it was given: they are the application's.
            boss.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            workers.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
