package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.List;

class EpollOnRdmaSocketConnectionAttemptTest extends SocketConnectionAttemptTest {
    /** The unroutable address (TEST-NET-2) and port Netty's test connects to. */
    private static final InetSocketAddress BAD = new InetSocketAddress("198.51.100.254", 65535);

    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    /**
     * Needs a connect to an unroutable address to stay pending. Where the network accepts TCP connections to any
     * address (a transparent proxy) it succeeds instead, and Netty's test fails the same way on Netty's own
     * {@code EpollIoHandler}: then this is aborted, saying why.
     */
    @Test
    @Override
    public void testConnectCancellation(TestInfo testInfo) throws Throwable {
        boolean connected;
        try (Socket socket = new Socket()) {
            socket.connect(BAD, 1000);
            connected = true;
        } catch (IOException e) {
            connected = false;
        }
        Assumptions.assumeFalse(connected, "this network accepts a TCP connection to " + BAD
                + ", so no connect attempt to it stays pending to be cancelled");
        super.testConnectCancellation(testInfo);
    }
}
