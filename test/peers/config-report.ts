/**
 * Test peer: prints, as one JSON line, what ucxx-ts left in the process environment for the UCX memory
 * hooks after loading UCX, and RNDV_THRESH as a Context without and with `config` sees it.
 */
import { Context } from 'ucxx-ts';

const plain = new Context();
const configured = new Context({ config: { RNDV_THRESH: '54321' } });
console.log(JSON.stringify({
  MEM_EVENTS: process.env['UCX_MEM_EVENTS'],
  MEM_MALLOC_HOOKS: process.env['UCX_MEM_MALLOC_HOOKS'],
  MEM_MMAP_HOOK_MODE: process.env['UCX_MEM_MMAP_HOOK_MODE'],
  rndvPlain: plain.getConfig()['RNDV_THRESH'],
  rndvConfigured: configured.getConfig()['RNDV_THRESH'],
}));
await plain.close();
await configured.close();
