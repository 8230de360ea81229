// Workgroup reductions and scans (subgroup operations, then one value per subgroup in
// shared memory). Call them from uniform control flow: they contain barriers. The order
// of operations is fixed, so results are bitwise reproducible run to run.
shared float red_f[WGS];
shared uint red_u[WGS];

float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) red_f[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) r += red_f[i];
  barrier();
  return r;
}

float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) red_f[gl_SubgroupID] = v;
  barrier();
  float r = red_f[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) r = max(r, red_f[i]);
  barrier();
  return r;
}

uint wg_sum_u(uint v) {
  v = subgroupAdd(v);
  if (subgroupElect()) red_u[gl_SubgroupID] = v;
  barrier();
  uint r = 0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) r += red_u[i];
  barrier();
  return r;
}

uint wg_min_u(uint v) {
  v = subgroupMin(v);
  if (subgroupElect()) red_u[gl_SubgroupID] = v;
  barrier();
  uint r = red_u[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) r = min(r, red_u[i]);
  barrier();
  return r;
}

// Exclusive prefix sum over the workgroup in invocation order; `total` gets the sum.
uint wg_exclusive_scan(uint v, out uint total) {
  uint incl = subgroupInclusiveAdd(v);
  if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) red_u[gl_SubgroupID] = incl;
  barrier();
  uint before = 0;
  total = 0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) {
    uint s = red_u[i];
    if (i < gl_SubgroupID) before += s;
    total += s;
  }
  barrier();
  return before + incl - v;
}
