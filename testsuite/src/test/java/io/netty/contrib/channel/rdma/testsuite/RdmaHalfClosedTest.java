package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketHalfClosedTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;

class RdmaHalfClosedTest extends SocketHalfClosedTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return new InetSocketAddress(TestAddress.get(), 0);
    }

    @Test
    @Override
    @Disabled("Relies on SO_LINGER=0: TCP's reset makes the peer's next write fail while its socket stays readable."
            + " An RDMA disconnect ends the queue pair in both directions at once. See testsuite/README.md.")
    public void testAutoCloseFalseDoesShutdownOutput(TestInfo testInfo) throws Throwable {
        super.testAutoCloseFalseDoesShutdownOutput(testInfo);
    }

    @Test
    @Override
    @Disabled("Relies on SO_LINGER and TCP's FIN_WAIT2 state (a closed socket that still receives). An RDMA"
            + " disconnect ends the queue pair in both directions at once. See testsuite/README.md.")
    public void testHalfClosureReceiveDataOnFinalWait2StateWhenSoLingerSet(TestInfo testInfo) throws Throwable {
        super.testHalfClosureReceiveDataOnFinalWait2StateWhenSoLingerSet(testInfo);
    }
}
