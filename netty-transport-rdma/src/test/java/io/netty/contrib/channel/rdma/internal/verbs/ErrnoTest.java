package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class ErrnoTest {

    @Test
    void commonErrnosHaveTheirSymbolicNames() {
        assertThat(Errno.name(22)).isEqualTo("EINVAL");
        assertThat(Errno.name(38)).isEqualTo("ENOSYS");
        assertThat(Errno.name(12)).isEqualTo("ENOMEM");
        assertThat(Errno.name(110)).isEqualTo("ETIMEDOUT");
        assertThat(Errno.name(111)).isEqualTo("ECONNREFUSED");
        assertThat(Errno.name(4000)).isEqualTo("errno 4000");
        assertThat(Errno.name(-1)).isEqualTo("errno -1");
        assertThat(Errno.describe(22)).isEqualTo("EINVAL (22)");
    }

    @Test
    void verbsExceptionNamesTheCallAndTheErrno() {
        VerbsException e = new VerbsException("ibv_modify_qp(RTR)", Errno.EINVAL);
        assertThat(e).hasMessage("ibv_modify_qp(RTR) failed: EINVAL (22)");
        assertThat(e.call()).isEqualTo("ibv_modify_qp(RTR)");
        assertThat(e.errno()).isEqualTo(22);
        assertThat(new VerbsException("ibv_reg_mr", Errno.ENOMEM, "raise RLIMIT_MEMLOCK"))
                .hasMessage("ibv_reg_mr failed: ENOMEM (12); raise RLIMIT_MEMLOCK");
    }

    @Test
    void missingSystemLibrariesSayHowToInstallThemOrUseTheSoftwareDevice() {
        assertThat(NativeLibraries.notInstalledMessage("libibverbs.so.1: cannot open shared object file"))
                .contains("apt-get install libibverbs1 librdmacm1")
                .contains("-Dio.netty.contrib.rdma.libraryPath=bundled")
                .contains("libibverbs.so.1: cannot open shared object file");
    }

    @Test
    void enumNamesMatchTheHeaders() {
        assertThat(IbvWcStatus.name(IbvWcStatus.REM_ACCESS_ERR)).isEqualTo("REM_ACCESS_ERR");
        assertThat(IbvWcStatus.name(IbvWcStatus.WR_FLUSH_ERR)).isEqualTo("WR_FLUSH_ERR");
        assertThat(IbvWcStatus.name(IbvWcStatus.RNR_RETRY_EXC_ERR)).isEqualTo("RNR_RETRY_EXC_ERR");
        assertThat(IbvQpState.name(IbvQpState.ERR)).isEqualTo("ERR");
        assertThat(IbvWcOpcode.name(IbvWcOpcode.RECV_RDMA_WITH_IMM)).isEqualTo("RECV_RDMA_WITH_IMM");
        assertThat(CmEventType.name(CmEventType.TIMEWAIT_EXIT)).isEqualTo("TIMEWAIT_EXIT");
    }
}
