package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.unix.Errors;
import io.netty.channel.unix.Errors.NativeIoException;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketRstTest;

import java.io.IOException;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class EpollOnRdmaSocketRstTest extends SocketRstTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.socket();
    }

    /** As Netty's EpollSocketRstTest: the epoll channel reports the reset as the native ECONNRESET. */
    @Override
    protected void assertRstOnCloseException(IOException cause, Channel clientChannel) {
        assertThat(cause).isInstanceOf(NativeIoException.class);
        assertThat(((NativeIoException) cause).expectedErr()).isEqualTo(Errors.ERRNO_ECONNRESET_NEGATIVE);
    }
}
