/*
 * Two processes, one tensor: a producer puts a 4x4 float32 tensor in
 * shared memory and hands it to a consumer over a Unix socket; the consumer
 * maps it, reads it, doubles it in place, and says so; the producer then
 * sees the doubled values in its own buffer. No byte of the tensor is
 * copied.
 *
 *   share_tensor --producer /tmp/dlb.sock &
 *   share_tensor --consumer /tmp/dlb.sock
 *
 * Either side may be another program speaking the same calls (the Python
 * package's dlbridge.share_recv, for instance).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlbridge/dlbridge.h>

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s: %s\n", what, dlb_status_name(dlb_last_error_code()), dlb_last_error_message());
  return 1;
}

static int unix_socket(const char* path, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof addr->sun_path) return -1;
  strcpy(addr->sun_path, path);
  return socket(AF_UNIX, SOCK_STREAM, 0);
}

static float* elements(dlb_buffer* b) {
  DLTensor t;
  if (dlb_buffer_dltensor(b, &t) != DLB_OK) return NULL;
  return (float*)((char*)t.data + t.byte_offset);
}

static int producer(const char* path) {
  struct sockaddr_un addr;
  const int64_t shape[2] = {4, 4};
  DLDevice cpu = {kDLCPU, 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  dlb_buffer* b = NULL;
  dlb_share_descriptor d;
  float* x;
  char ack = 0;
  int i, conn, s = unix_socket(path, &addr);
  if (s < 0) return perror("socket"), 1;
  unlink(path);
  if (bind(s, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(s, 1) != 0) return perror("bind"), 1;
  if (dlb_buffer_alloc_shared(cpu, f32, 2, shape, &b) != DLB_OK) return fail("dlb_buffer_alloc_shared");
  x = elements(b);
  for (i = 0; i < 16; ++i) x[i] = (float)i;
  printf("producer: shared 4x4 float32, sum %g\n", 120.0);
  fflush(stdout);
  conn = accept(s, NULL, NULL);
  if (conn < 0) return perror("accept"), 1;
  if (dlb_buffer_share(b, 0, &d) != DLB_OK) return fail("dlb_buffer_share");
  if (dlb_share_send(conn, &d) != DLB_OK) return fail("dlb_share_send");
  dlb_share_descriptor_close(&d); /* the consumer has its own now */
  if (read(conn, &ack, 1) != 1 || ack != 'd') return fprintf(stderr, "producer: no reply\n"), 1;
  printf("producer: after the consumer: x[15] = %g\n", (double)x[15]);
  close(conn);
  close(s);
  unlink(path);
  dlb_buffer_release(b);
  return x == NULL ? 1 : 0;
}

static int consumer(const char* path) {
  struct sockaddr_un addr;
  dlb_share_descriptor d;
  dlb_buffer* b = NULL;
  DLTensor t;
  double sum = 0;
  float* x;
  int i, tries, s = unix_socket(path, &addr);
  if (s < 0) return perror("socket"), 1;
  for (tries = 0; connect(s, (struct sockaddr*)&addr, sizeof addr) != 0; ++tries) {
    if (tries == 200) return perror("connect"), 1;
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL); /* the producer may not listen yet */
  }
  if (dlb_share_recv(s, &d) != DLB_OK) return fail("dlb_share_recv");
  if (d.fd < 0) return fprintf(stderr, "consumer: the producer sent nothing\n"), 1;
  if (dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &b) != DLB_OK) return fail("dlb_buffer_open_shared");
  dlb_share_descriptor_close(&d); /* the buffer keeps its own */
  dlb_buffer_dltensor(b, &t);
  x = elements(b);
  for (i = 0; i < 16; ++i) sum += x[i];
  printf("consumer: %dx%d, sum %g\n", (int)t.shape[0], (int)t.shape[1], sum);
  for (i = 0; i < 16; ++i) x[i] *= 2;
  dlb_buffer_release(b);
  if (write(s, "d", 1) != 1) return perror("write"), 1;
  close(s);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--producer") == 0) return producer(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--consumer") == 0) return consumer(argv[2]);
  fprintf(stderr, "usage: %s --producer|--consumer SOCKET_PATH\n", argv[0]);
  return 2;
}
